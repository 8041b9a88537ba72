// parmon view: serves a trace's web UI and its JSON API (docs/man/parmon-view.md,
// docs/http-api.md). The trace is analysed as `parmon report` does (the labels, ranks and
// findings) and indexed once (web/trace_index.h); every request is then answered from memory.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
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
#include "web/progressive_view.h"
#include "web/trace_index.h"
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

// From this many events on, `--progressive auto` serves the coarse level first: the complete
// index of fewer is built in about a second (docs/web.md).
constexpr uint64_t kProgressiveFrom = 2'000'000;

// A trace the progressive view takes: one file, closed cleanly, no damage found at open (the
// others keep the checks and sentences of the path that builds before serving).
bool ProgressiveFits(const model::Session& session, const std::string& mode) {
  const format::TraceReader& reader = session.reader();
  if (mode == "off" || reader.parts().size() != 1 || !reader.closed_cleanly())
    return false;
  for (const auto& p : reader.problems())
    if (!p.harmless)
      return false;
  return mode == "on" || reader.total_events() >= kProgressiveFrom;
}

// The coarse level at once, the complete one behind it (web/progressive_view.h).
int RunProgressive(std::unique_ptr<model::Session> session,
                   const std::string& path,
                   const ReportInputOptions& in,
                   const web::HttpOptions& http,
                   double exit_after_s) {
  const auto begun = std::chrono::steady_clock::now();
  auto view = web::ProgressiveView::Over(std::move(session));
  auto server = ServeUi(http, [&view](std::string_view target) { return view->Handle(target); });
  if (!server)
    return 1;
  fmt::print(stderr, "parmon view: coarse level (sampler streams) ready in {:.2f} s{}\n",
             view->coarse_seconds(),
             web::UiBuilt() ? "" : " (this parmon has no web UI built in: only the API)");
  static std::atomic<bool> failed{false};
  view->Start([path, in] { return LoadResults(path, in); },
              [begun](const Status& s, const web::ProgressiveView& v) {
                const double at =
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
                if (!s.ok()) {
                  fmt::print(stderr, "parmon view: {}\n", s.message());
                  failed = true;
                  kill(getpid(), SIGTERM);  // the server stops as on a user's SIGTERM
                  return;
                }
                fmt::print(stderr,
                           "parmon view: {} events, {} rows, {} CPUs, {} messages; complete "
                           "index served {:.2f} s after start\n",
                           v.index().events(), v.api().rows().size(), v.index().cpus().size(),
                           v.index().messages().size(), at);
              });
  const int rc = RunServer(*server, http, exit_after_s);
  if (!view->complete()) {
    // Stopped while the complete level is still being built: nothing is written, so the process
    // ends here rather than wait minutes for the builders to finish.
    std::fflush(nullptr);
    _exit(failed ? 1 : rc);
  }
  return failed ? 1 : rc;
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
  std::string progressive = "auto";
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
  app.add_option("--progressive", progressive,
                 "serve a coarse level (the sampler streams) at once and the complete index when "
                 "built: auto (from 2 M events), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  app.add_flag("--partial", in.partial, "serve a damaged or truncated trace from what is intact");
  app.add_option("--exit-after", exit_after_s, "stop serving after this many seconds (tests)")
      ->check(CLI::Range(0.0, 1e7));
  if (int rc = ParseCommandLine(app, argc, argv, "view"); rc >= 0)
    return rc;
  if (follow || live::IsRemoteSession(path))
    return RunLiveView(path, http, in, period_s, exit_after_s);
  bool bad_options = false;
  if (progressive != "off" && !in.partial && ParseAnalysisOptions(in, &bad_options).ok()) {
    auto opened = model::Session::Open(path);
    if (opened.ok() && ProgressiveFits(**opened, progressive))
      return RunProgressive(std::move(*opened), path, in, http, exit_after_s);
  }
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
