// parmon serve: the collector daemon. See docs/man/parmon-serve.md and docs/live.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "cli/view_common.h"
#include "live/client.h"
#include "live/protocol.h"
#include "live/server.h"
#include "web/http_server.h"
#include "web/live_view.h"
#include "web/session_host.h"
#include "web/ui_bundle.h"

namespace parmon::cli {

namespace {

// A token as one path segment: every byte but [A-Za-z0-9._~-] percent-encoded.
std::string PathSegment(const std::string& token) {
  std::string out;
  for (unsigned char c : token) {
    if (isalnum(c) || c == '.' || c == '_' || c == '~' || c == '-')
      out += static_cast<char>(c);
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

// --http: the web UI of every session of the store (web/session_host.h), on threads of its own
// (never the collector's io thread). Null, having said why, when it cannot listen.
struct HttpSide {
  std::unique_ptr<web::SessionHost> host;
  std::unique_ptr<web::HttpServer> server;
  std::string url;
};
StatusOr<HttpSide> StartHttp(const live::Endpoint& ep,
                             const std::string& store,
                             const std::string& token,
                             size_t sessions) {
  ReportInputOptions in;
  in.partial = true;  // a damaged stored session is shown from what is intact, its damage listed
  auto analysis = ParseAnalysisOptions(in);
  if (!analysis.ok())
    return analysis.status();
  web::SessionHostOptions o;
  o.store = store;
  o.max_sessions = sessions;
  o.prefix = token.empty() ? "" : "/" + PathSegment(token);
  auto open_stored =
      [in](const std::string& path) -> StatusOr<std::unique_ptr<web::ServedSession>> {
    auto view = OpenStoredView(path, in);
    if (!view.ok())
      return view.status();
    return std::unique_ptr<web::ServedSession>(std::move(*view));
  };
  auto open_live = [options = *analysis](const std::string& name,
                                         std::function<StatusOr<live_view::LiveSource>()> source)
      -> StatusOr<std::unique_ptr<web::ServedSession>> {
    auto view = web::LiveView::Open(name, options, 1'000'000'000, std::move(source));
    if (!view.ok())
      return view.status();
    (*view)->Start();
    return std::unique_ptr<web::ServedSession>(std::move(*view));
  };
  HttpSide side;
  side.host = std::make_unique<web::SessionHost>(o, open_stored, open_live);
  web::HttpOptions http;
  http.host = ep.host;
  http.port = ep.port;
  http.threads = 4;  // a session being indexed holds one; the list and others go on
  auto server = web::HttpServer::Create(
      http, [host = side.host.get()](std::string_view target) { return host->Handle(target); });
  if (!server.ok())
    return server.status();
  side.server = std::move(*server);
  const std::string host = ep.host.find(':') != std::string::npos ? "[" + ep.host + "]" : ep.host;
  side.url = fmt::format("http://{}:{}{}/", host, side.server->port(), o.prefix);
  return side;
}

}  // namespace

int RunServe(int argc, char** argv) {
  CLI::App app{"Collect sessions streamed by `parmon record --to` and serve them to consumers.",
               "parmon serve"};
  std::string listen = "127.0.0.1:7878", token_file;
  live::ServeOptions o;
  app.add_option("--listen", listen,
                 "address and port to listen on (port 0: any free port, printed on stdout); an "
                 "address other than loopback needs --token-file")
      ->capture_default_str();
  app.add_option("--store", o.store, "directory of the sessions' trace files")
      ->capture_default_str();
  app.add_option("--token-file", token_file,
                 "file whose first line is the token every recorder and consumer must present");
  app.add_option("--max-connections", o.max_connections,
                 "connections at once; more are refused with a log line")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--exec", o.exec,
                 "run this shell command per new stream with the stream's trace bytes on its "
                 "standard input");
  std::string http_listen;
  size_t http_sessions = web::kDefaultHttpSessions;
  app.add_option("--http", http_listen,
                 "also serve the web UI of every stored and live session on this ADDRESS:PORT "
                 "(port 0: any free port; the URL is the second line on stdout); an address other "
                 "than loopback needs --token-file, whose token is then part of the URL");
  app.add_option("--http-sessions", http_sessions,
                 "with --http: sessions indexed at once (the least recently used is dropped)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--lost-after", o.lost_after_s,
                 "seconds a recorder whose connection closed without the end of its recording "
                 "has to reconnect before its stream is marked lost (it may still resume later)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--idle-timeout", o.idle_timeout_s,
                 "seconds without a frame after which a recorder is dropped")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  if (int rc = ParseCommandLine(app, argc, argv, "serve"); rc >= 0)
    return rc;
  auto ep = live::ParseEndpoint(listen);
  if (!ep.ok() || !ep->session.empty()) {
    fmt::print(stderr, "parmon serve: --listen {}: {}\n", listen,
               ep.ok() ? "give ADDRESS:PORT without a session" : ep.status().message());
    return kUsageExit;
  }
  o.host = ep->host;
  o.port = ep->port;
  std::optional<live::Endpoint> http_ep;
  if (!http_listen.empty()) {
    auto parsed = live::ParseEndpoint(http_listen);
    if (!parsed.ok() || !parsed->session.empty() || http_listen.find(':') == std::string::npos) {
      fmt::print(stderr, "parmon serve: --http {}: {}\n", http_listen,
                 parsed.ok() ? "give ADDRESS:PORT" : parsed.status().message());
      return kUsageExit;
    }
    if (!live::IsLoopback(parsed->host) && token_file.empty()) {
      fmt::print(stderr,
                 "parmon serve: --http {}: an address other than loopback needs --token-file "
                 "(anyone who reaches it could read every session)\n",
                 http_listen);
      return kUsageExit;
    }
    http_ep = *parsed;
  }
  if (!token_file.empty()) {
    auto token = live::ReadToken(token_file);
    if (!token.ok()) {
      fmt::print(stderr, "parmon serve: {}\n", token.status().message());
      return kUsageExit;
    }
    o.token = *token;
  }
  auto server = live::Server::Create(o);
  if (!server.ok()) {
    fmt::print(stderr, "parmon serve: {}\n", server.status().message());
    return 1;
  }
  HttpSide http;
  if (http_ep) {
    auto started = StartHttp(*http_ep, o.store, o.token, http_sessions);
    if (!started.ok()) {
      fmt::print(stderr, "parmon serve: --http: {}\n", started.status().message());
      return 1;
    }
    http = std::move(*started);
  }
  // Line 1 of stdout: the port, for scripts and tests that listen on port 0; line 2 with
  // --http: the web UI's URL.
  fmt::print("{}\n", (*server)->port());
  if (http.server)
    fmt::print("parmon serve: {}\n", http.url);
  fflush(stdout);
  fmt::print(stderr, "parmon serve: listening on {}:{}, storing in {}{}\n", o.host,
             (*server)->port(), o.store, o.token.empty() ? "" : ", token required");
  if (http.server && !web::UiBuilt())
    fmt::print(stderr, "parmon serve: this parmon has no web UI built in: --http serves the API\n");
  // Both stop at SIGINT or SIGTERM (each io_context waits for them).
  std::thread http_thread;
  if (http.server)
    http_thread = std::thread([&http] { http.server->Run(std::chrono::milliseconds(0)); });
  (*server)->Run();
  if (http_thread.joinable())
    http_thread.join();
  return 0;
}

}  // namespace parmon::cli
