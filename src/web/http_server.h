// web::HttpServer: the small HTTP/1.1 server of `parmon view` (Boost.Beast over Boost.Asio, both
// header-only from Debian's libboost-dev, as src/live uses Asio).
//
// Read-only and bounded: only GET and HEAD; a request's header is at most kMaxHeaderBytes and its
// body at most kMaxBodyBytes (431, 413 otherwise); a connection silent for kIdleTimeout is
// closed; over max_connections a new connection gets a 503 and is closed. Every error answer is
// one sentence ({"error": "..."}). The handler must be thread-safe: the server runs its
// io_context on `threads` threads, each connection on its own strand.
#ifndef PARMON_SRC_WEB_HTTP_SERVER_H_
#define PARMON_SRC_WEB_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "web/api.h"

namespace parmon::web {

constexpr size_t kMaxHeaderBytes = 8 * 1024;
constexpr size_t kMaxBodyBytes = 1024;
constexpr auto kIdleTimeout = std::chrono::seconds(30);

struct HttpOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  int max_connections = 128;
  int threads = 2;
};

// Answers one GET: target is the path and query as the client sent it.
using HttpHandler = std::function<ApiResponse(std::string_view target)>;

class HttpServer {
 public:
  // Binds and listens (a busy port or a bad host is an error sentence).
  static StatusOr<std::unique_ptr<HttpServer>> Create(const HttpOptions& options,
                                                      HttpHandler handler);
  virtual ~HttpServer() = default;
  virtual uint16_t port() const = 0;
  // Serves until SIGINT or SIGTERM, or until exit_after has passed (0: no limit).
  virtual void Run(std::chrono::milliseconds exit_after) = 0;
  // Connections served so far (tests).
  virtual uint64_t connections() const = 0;
};

}  // namespace parmon::web

#endif  // PARMON_SRC_WEB_HTTP_SERVER_H_
