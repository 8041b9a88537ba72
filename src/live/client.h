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
  static StatusOr<std::unique_ptr<Channel>> Open(const Endpoint& endpoint,
                                                 const std::string& token,
                                                 double timeout_s = 10);
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

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_CLIENT_H_
