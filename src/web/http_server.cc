// HttpServer (http_server.h): an acceptor and one Connection object per socket, each reading a
// request with a bounded parser, answering it with the handler and reading the next (keep-alive)
// until the peer closes, errs or stays silent past the timeout.
#include "web/http_server.h"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace parmon::web {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr auto kLingerTimeout = std::chrono::seconds(2);
constexpr size_t kMaxLingerBytes = 1 << 20;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, const HttpHandler& handler, std::atomic<int>* active, bool refuse)
      : stream_(std::move(socket)), handler_(handler), active_(active), refuse_(refuse) {
    ++*active_;
  }
  ~Connection() { --*active_; }

  void Start() {
    if (refuse_) {
      Send(ErrorResponse(503, "The server has too many connections open; try again later."), false,
           false);
      return;
    }
    Read();
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(kMaxBodyBytes);
    stream_.expires_after(kIdleTimeout);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset)
      return Close();
    if (ec == http::error::header_limit)
      return Send(ErrorResponse(431, "The request's header is larger than the server accepts."),
                  false, false);
    if (ec == http::error::body_limit || ec == http::error::buffer_overflow)
      return Send(ErrorResponse(413, "The request is larger than the server accepts."), false,
                  false);
    if (ec)
      return Send(ErrorResponse(400, "The request is not valid HTTP/1.1."), false, false);
    const auto& req = parser_->get();
    const bool head = req.method() == http::verb::head;
    if (req.method() != http::verb::get && !head)
      return Send(ErrorResponse(405, "Only GET and HEAD requests are served."), false, false);
    ApiResponse r;
    const auto begun = std::chrono::steady_clock::now();
    try {
      r = handler_(std::string_view(req.target().data(), req.target().size()));
    } catch (const std::exception&) {  // (an allocation failure): the connection ends, not parmon
      r = ErrorResponse(500, "The server could not answer this request.");
    }
    Send(std::move(r), req.keep_alive(), head,
         std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begun)
             .count());
  }

  // handled_ms: the time the answer took to compute, sent as a Server-Timing header (the
  // browser's resource timing shows it; bench/view_browser_bench.mjs reads it).
  void Send(ApiResponse r, bool keep_alive, bool head, double handled_ms = -1) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), 11);
    res->set(http::field::server, "parmon view");
    if (handled_ms >= 0)
      res->set("Server-Timing", fmt::format("handle;dur={:.3f}", handled_ms));
    res->set(http::field::content_type, r.content_type);
    res->set(http::field::cache_control, "no-store");
    if (!r.location.empty())
      res->set(http::field::location, r.location);
    res->keep_alive(keep_alive);
    if (head) {
      res->content_length(r.body.size());
    } else {
      res->body() = std::move(r.body);
      res->prepare_payload();
    }
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, keep_alive](beast::error_code ec, size_t) {
                        if (ec)
                          return self->Close();
                        if (!keep_alive)
                          return self->Linger();
                        self->Read();
                      });
  }

  // Closing a socket with unread bytes resets it, and the peer may lose the answer it has not
  // read yet (an error about a too large request): after our half-close, read and drop what the
  // peer still sends, a bounded amount for a bounded time, then close.
  void Linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(kLingerTimeout);
    stream_.async_read_some(asio::buffer(drain_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->drained_ += n;
                              if (ec || self->drained_ > kMaxLingerBytes)
                                return self->Close();
                              self->Linger();
                            });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{kMaxHeaderBytes + kMaxBodyBytes};
  std::optional<http::request_parser<http::string_body>> parser_;
  const HttpHandler& handler_;
  std::atomic<int>* active_;
  bool refuse_;
  std::array<char, 4096> drain_;
  size_t drained_ = 0;
};

class ServerImpl : public HttpServer {
 public:
  ServerImpl(const HttpOptions& options, HttpHandler handler)
      : options_(options), handler_(std::move(handler)), acceptor_(ioc_), signals_(ioc_) {}

  Status Open() {
    beast::error_code ec;
    const auto address = asio::ip::make_address(options_.host, ec);
    if (ec)
      return Status::Error("'" + options_.host + "' is not an IP address to listen on");
    tcp::endpoint ep(address, options_.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec)
      acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec)
      acceptor_.bind(ep, ec);
    if (!ec)
      acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return Status::Error("cannot listen on " + options_.host + ":" +
                           std::to_string(options_.port) + ": " + ec.message());
    return Status::Ok();
  }

  uint16_t port() const override { return acceptor_.local_endpoint().port(); }
  uint64_t connections() const override { return accepted_; }

  void Run(std::chrono::milliseconds exit_after) override {
    signals_.add(SIGINT);
    signals_.add(SIGTERM);
    signals_.async_wait([this](beast::error_code, int) { ioc_.stop(); });
    asio::steady_timer timer(ioc_);
    if (exit_after.count() > 0) {
      timer.expires_after(exit_after);
      timer.async_wait([this](beast::error_code ec) {
        if (!ec)
          ioc_.stop();
      });
    }
    Accept();
    std::vector<std::thread> threads;
    for (int i = 1; i < options_.threads; ++i)
      threads.emplace_back([this] { ioc_.run(); });
    ioc_.run();
    for (auto& t : threads)
      t.join();
  }

 private:
  void Accept() {
    acceptor_.async_accept(
        asio::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
          if (!ec) {
            ++accepted_;
            const bool refuse = active_.load() >= options_.max_connections;
            std::make_shared<Connection>(std::move(socket), handler_, &active_, refuse)->Start();
          } else if (ec == asio::error::operation_aborted) {
            return;
          }
          // Out of descriptors (EMFILE) and the like: keep serving those already connected.
          Accept();
        });
  }

  HttpOptions options_;
  HttpHandler handler_;
  // Before the io_context: connections still queued in it when it is destroyed use them.
  std::atomic<int> active_{0};
  std::atomic<uint64_t> accepted_{0};
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  asio::signal_set signals_;
};

}  // namespace

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(const HttpOptions& options,
                                                         HttpHandler handler) {
  auto server = std::make_unique<ServerImpl>(options, std::move(handler));
  if (Status s = server->Open(); !s.ok())
    return s;
  return std::unique_ptr<HttpServer>(std::move(server));
}

}  // namespace parmon::web
