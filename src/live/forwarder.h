// The recorder's side of `parmon record --to HOST:PORT`: a thread that tails the session's local
// trace file and streams it to the collector. The program is never blocked by the network: the
// recorder writes its file as always (the -o file, or a spool file), and the forwarder reads it
// behind the writer, sending only whole chunks while the recording runs (the writer only ever
// appends whole chunks; a partial one may still be cut back). After a cut it reconnects with
// backoff; the collector's WELCOME says how many bytes it holds, and sending resumes there, so
// nothing is lost or sent twice. It says in one line on stderr when it loses the collector and
// when it reaches it again. CONTROL frames go to a ControlHandler and its answer goes back.
#ifndef PARMON_SRC_LIVE_FORWARDER_H_
#define PARMON_SRC_LIVE_FORWARDER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "live/protocol.h"

namespace parmon::live {

struct ForwardOptions {
  Endpoint endpoint;     // the collector; endpoint.session overrides hello.session when set
  std::string path;      // the local trace file the recorder writes
  Hello hello;           // session, job, rank, ranks, host, pid, token (stream_id: made here)
  double linger_s = 30;  // after the recording: how long to keep trying to deliver the rest
};

class Forwarder {
 public:
  explicit Forwarder(ForwardOptions options);
  ~Forwarder();
  // Installs the handler of CONTROL commands (before Start). Without one, every command is
  // answered "unknown command".
  void SetControlHandler(ControlHandler handler);
  void Start();
  // The recording is over and the file final: sends the rest, waits until the collector holds
  // all of it or linger_s passes. Ok when the collector holds the whole session.
  Status Finish();
  const std::string& session() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A stream id that tells one recording from another that reuses its session name.
std::string NewStreamId();

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_FORWARDER_H_
