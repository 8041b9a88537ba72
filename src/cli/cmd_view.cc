// parmon view: serves a trace's web UI and its JSON API (docs/man/parmon-view.md,
// docs/http-api.md). The trace is analysed as `parmon report` does (the labels, ranks and
// findings) and indexed once (web/trace_index.h); every request is then answered from memory.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <functional>

#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "cli/report_common.h"
#include "cli/view_common.h"
#include "live/fetch.h"
#include "web/api.h"
#include "web/http_server.h"
#include "web/live_view.h"
#include "web/ui_bundle.h"

namespace parmon::cli {

namespace {

// The server of the page (built in) and of the API answered by `api`; on error, says why.
std::unique_ptr<web::HttpServer> ServeUi(const web::HttpOptions& http,
                                         std::function<web::ApiResponse(std::string_view)> api) {
  auto server = web::HttpServer::Create(http, [api = std::move(api)](std::string_view target) {
    if (target.substr(0, 5) == "/api/")
      return api(target);
    return web::UiFile(target.substr(0, target.find('?')));
  });
  if (!server.ok()) {
    fmt::print(stderr, "parmon view: {}\n", server.status().message());
    return nullptr;
  }
  return std::move(*server);
}

// Prints the URL (the first line on stdout) and serves until stopped.
int RunServer(web::HttpServer& server, const web::HttpOptions& http, double exit_after_s) {
  const std::string host =
      http.host.find(':') != std::string::npos ? "[" + http.host + "]" : http.host;
  fmt::print("parmon view: http://{}:{}/\n", host, server.port());
  std::fflush(stdout);
  server.Run(std::chrono::milliseconds(static_cast<int64_t>(exit_after_s * 1000)));
  return 0;
}

// --follow: the UI over a session still being written (web/live_view.h).
int RunLiveView(const std::string& name,
                const web::HttpOptions& http,
                const ReportInputOptions& in,
                double period_s,
                double exit_after_s) {
  bool usage_error = false;
  auto options = ParseAnalysisOptions(in, &usage_error);
  if (!options.ok()) {
    fmt::print(stderr, "parmon view: {}\n", options.status().message());
    return kUsageExit;
  }
  auto view = web::LiveView::Open(name, *options, static_cast<uint64_t>(period_s * 1e9));
  if (!view.ok()) {
    fmt::print(stderr, "parmon view: {}\n", view.status().message());
    return 1;
  }
  web::LiveView& live = **view;
  auto server = ServeUi(http, [&live](std::string_view target) { return live.Handle(target); });
  if (!server)
    return 1;
  live.Start();
  fmt::print(stderr, "parmon view: following {}{}\n", name,
             web::UiBuilt() ? "" : " (this parmon has no web UI built in: only the API)");
  return RunServer(*server, http, exit_after_s);
}

}  // namespace

int RunView(int argc, char** argv) {
  CLI::App app{"Serve a trace's timeline, CPU view and findings to a web browser.", "parmon view"};
  std::string path;
  web::HttpOptions http;
  double exit_after_s = 0;
  ReportInputOptions in;
  bool follow = false;
  double period_s = 1.0;
  app.add_option("trace", path,
                 "a .ptrace file or a per-rank session directory; with --follow also "
                 "HOST:PORT/SESSION of `parmon serve`")
      ->required();
  app.add_flag("--follow", follow,
               "follow a session still being written: every view grows with it (implied by "
               "HOST:PORT/SESSION)");
  app.add_option("--period", period_s, "with --follow: seconds between refreshes")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  app.add_option("--port", http.port, "port to listen on (0: any free port)")
      ->capture_default_str();
  app.add_option("--host", http.host,
                 "address to listen on (anyone who can reach it can read the trace)")
      ->capture_default_str();
  app.add_flag("--partial", in.partial, "serve a damaged or truncated trace from what is intact");
  app.add_option("--exit-after", exit_after_s, "stop serving after this many seconds (tests)")
      ->check(CLI::Range(0.0, 1e7));
  if (int rc = ParseCommandLine(app, argc, argv, "view"); rc >= 0)
    return rc;
  if (follow || live::IsRemoteSession(path))
    return RunLiveView(path, http, in, period_s, exit_after_s);
  const auto begun = std::chrono::steady_clock::now();
  bool usage_error = false;
  double analysed_s = 0;
  auto view = OpenStoredView(path, in, &usage_error, &analysed_s);
  if (!view.ok()) {
    fmt::print(stderr, "parmon view: {}\n", view.status().message());
    return usage_error ? kUsageExit : 1;
  }
  const web::StoredView& stored = **view;
  auto server = ServeUi(http, [&stored](std::string_view target) { return stored.Handle(target); });
  if (!server)
    return 1;
  const double ready_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  fmt::print(stderr,
             "parmon view: {} events, {} rows, {} CPUs, {} messages; analysed in {:.2f} s, "
             "indexed in {:.2f} s{}\n",
             stored.index().events(), stored.api().rows().size(), stored.index().cpus().size(),
             stored.index().messages().size(), analysed_s, ready_s - analysed_s,
             web::UiBuilt() ? "" : " (this parmon has no web UI built in: only the API)");
  return RunServer(*server, http, exit_after_s);
}

}  // namespace parmon::cli
