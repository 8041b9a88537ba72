// Client side of the live protocol for short-lived consumers: `parmon ctl`, `parmon fetch`,
// `parmon top` on a remote session. A Channel is one connection with blocking calls that each
// take a timeout (run on a private io_context, so a dead collector never hangs the caller).
#ifndef PARMON_SRC_LIVE_CLIENT_H_
#define PARMON_SRC_LIVE_CLIENT_H_

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "live/protocol.h"

namespace parmon::live {

class Channel {
 public:
  // Connects and, for a consumer, sends HELLO (role "consumer") with the token.
  // version: what HELLO says (2 to send QUERY; 1, understood by every collector, otherwise).
  static StatusOr<std::unique_ptr<Channel>> Open(const Endpoint& endpoint,
                                                 const std::string& token,
                                                 double timeout_s = 10,
                                                 int version = kBaseProtocolVersion);
  ~Channel();
  Status Write(FrameType type, std::string_view payload, double timeout_s = 10);
  // The next frame; timeout_s < 0 waits for ever.
  StatusOr<Frame> Read(double timeout_s = 10);
  // The last Read failed for want of a frame within its timeout (the channel is still usable).
  bool timed_out() const;

 private:
  struct Impl;
  explicit Channel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The token to present: the file named by token_file when not empty, else $PARMON_TOKEN_FILE's,
// else none. The file holds the token on its first line.
StatusOr<std::string> ReadToken(const std::string& token_file);

// The error a collector states in a BYE or CONTROL payload ({"error": ...}); empty if none.
std::string PeerError(const Frame& f);

// `parmon ctl HOST:PORT SESSION CMD...`: sends one command to the session's recorder(s) through
// the collector and returns their reply (one line per rank for a per-rank session). rank -1: all.
StatusOr<std::string> SendControl(const std::string& host_port,
                                  const std::string& session,
                                  const std::string& command,
                                  int rank = -1,
                                  const std::string& token_file = "");

// The collector's live analysis of a session (QUERY, protocol version 2): what the snapshot
// covers (meta: the WELCOME's JSON, docs/live.md) and the report, rendered by the collector as
// `parmon report --format json` (format "json") or as its text ("text") would render it.
struct RemoteSnapshot {
  std::string meta;
  std::string body;
  bool ended = false;  // the recording has ended: this is the final report
  // The collector marked a stream lost (its recorder went without the end): its sentence. This
  // snapshot is then the last, of what the collector holds.
  std::string lost;
};
// An answer meaning the session is not there yet (no recorder has streamed it, or nothing of it is
// complete): a follower asks again later.
bool NotYetThere(const Status& status);
class SnapshotClient {
 public:
  // host_port: "HOST:PORT[/SESSION]" (the session, if any, is ignored here).
  static StatusOr<std::unique_ptr<SnapshotClient>> Open(const std::string& host_port,
                                                        const std::string& token_file = "");
  // One snapshot; the connection is kept for the next (and opened again if the collector
  // closed it). timeout_s bounds the wait for the answer.
  StatusOr<RemoteSnapshot> Ask(const std::string& session,
                               const std::string& format,
                               double timeout_s = 60);

 private:
  Endpoint endpoint_;
  std::string token_;
  std::unique_ptr<Channel> channel_;
};

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_CLIENT_H_
