// The collector daemon behind `parmon serve` (docs/live.md, docs/man/parmon-serve.md).
//
// One thread, one boost::asio::io_context, every socket asynchronous: no thread per connection.
// Each connection holds at most one frame (kMaxFramePayload) and a few small replies; the number
// of connections is bounded (--max-connections; over it new ones are closed with a log line).
// Recorders stream DATA into the store (live/store.h) and get ACKs; consumers SUBSCRIBE and get
// the stored bytes from an offset then the live appends, read back from the store file at their
// own pace; CONTROL requests from a consumer are forwarded to the session's recorders and their
// replies returned. `--exec CMD` feeds each new stream to `sh -c CMD` on its standard input the
// same way. Every connect, disconnect and refusal is one line on stderr with its reason.
#ifndef PARMON_SRC_LIVE_SERVER_H_
#define PARMON_SRC_LIVE_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace parmon::live {

struct ServeOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 7878;  // 0: any free port (Server::port() says which)
  std::string store = ".";
  std::string token;  // empty: no token (loopback only)
  int max_connections = 256;
  std::string exec;                 // sh -c command fed each new stream on stdin
  double handshake_timeout_s = 10;  // for the first frame
  double idle_timeout_s = 60;       // a recorder silent this long is dropped
  double control_timeout_s = 5;     // a CONTROL reply from the recorders
  // A recorder whose connection closed without its end and that has not reconnected within
  // this long has its stream marked lost (it may still reconnect and resume afterwards).
  double lost_after_s = 5;
};

class Server {
 public:
  // Binds the listening socket. A non-loopback host without a token is refused here.
  static StatusOr<std::unique_ptr<Server>> Create(const ServeOptions& options);
  virtual ~Server() = default;
  virtual uint16_t port() const = 0;
  // Serves until SIGINT or SIGTERM.
  virtual void Run() = 0;
};

// Whether host is a loopback address (127.0.0.0/8, ::1, localhost).
bool IsLoopback(const std::string& host);

}  // namespace parmon::live

#endif  // PARMON_SRC_LIVE_SERVER_H_
