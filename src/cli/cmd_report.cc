// parmon report: what each thread and rank did, the communication matrix, intervals, wait states
// and a diagnosis. See docs/man/parmon-report.md.
#include <sys/ioctl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "analysis/engine.h"
#include "analysis/json_dump.h"
#include "analysis/units.h"
#include "analysis/views.h"
#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "cli/report_common.h"
#include "live/client.h"
#include "live/fetch.h"
#include "live/protocol.h"
#include "live_view/follow.h"
#include "model/session.h"
#include "parallel/parallel_report.h"
#include "recorder/launcher.h"
#include "recorder/recorder.h"

namespace parmon::cli {

// A file still being written (not closed, no damage but its open end, a WATERMARK read): the
// window in which every stream is complete, in ns from the session start as the engine counts.
std::optional<uint64_t> LiveWindowEnd(const model::Session& session) {
  const format::TraceReader& reader = session.reader();
  if (reader.closed_cleanly() || reader.complete_until() == 0 || reader.parts().size() != 1)
    return std::nullopt;
  for (const auto& p : reader.problems())
    if (!p.tail)
      return std::nullopt;
  // Events at ts < complete_until() are all read; the engine's window end is inclusive.
  const uint64_t start = session.start();
  return reader.complete_until() > start + 1 ? reader.complete_until() - 1 - start : 0;
}

namespace {
// An error in the options rather than in the trace: the caller exits 2.
Status UsageError(bool* usage_error, std::string message) {
  if (usage_error)
    *usage_error = true;
  return Status::Error(std::move(message));
}
// Every interval costs memory for each location (a row of state times), so the number of
// intervals is bounded, and lower for a session with many threads and CPUs.
Status CheckIntervalCount(const model::Session& session,
                          const analysis::Options& options,
                          const std::string& interval) {
  const format::TraceReader& reader = session.reader();
  const uint64_t end = std::max(reader.last_ts(), session.totals().end_ts);
  const uint64_t run = end > session.start() ? end - session.start() : 0;
  const uint64_t span = std::min(run, options.to_ns) - std::min(run, options.from_ns);
  const uint64_t locations = std::max<uint64_t>(1, session.definitions().locations.size());
  const uint64_t limit =
      std::max<uint64_t>(1, std::min(kMaxIntervals, kMaxIntervalCells / locations));
  const uint64_t count = span / options.interval_ns;
  if (count < limit)
    return Status::Ok();
  return Status::Error(fmt::format(
      "--interval {} would cut the {} of the run into {} intervals; at most {} are allowed{} "
      "(use --interval {} or longer)",
      interval, analysis::FormatDuration(span), count, limit,
      limit < kMaxIntervals ? fmt::format(" for its {} threads and CPUs", locations) : "",
      analysis::FormatDuration(span / limit + 1)));
}

}  // namespace

StatusOr<analysis::Options> ParseAnalysisOptions(const ReportInputOptions& in, bool* usage_error) {
  analysis::Options options;
  if (!in.from.empty() && !recorder::ParseDuration(in.from, &options.from_ns))
    return UsageError(usage_error,
                      fmt::format("--from {} is not a duration (try 1.5s or 200ms)", in.from));
  if (!in.to.empty() && !recorder::ParseDuration(in.to, &options.to_ns))
    return UsageError(usage_error,
                      fmt::format("--to {} is not a duration (try 1.5s or 200ms)", in.to));
  if (!in.interval.empty() &&
      (!recorder::ParseDuration(in.interval, &options.interval_ns) || options.interval_ns == 0))
    return UsageError(usage_error,
                      fmt::format("--interval {} is not a positive duration", in.interval));
  if (options.to_ns <= options.from_ns)
    return UsageError(usage_error, "--to must be later than --from");
  options.default_event_cost_ns = kDefaultEventCostNs;
  options.default_switch_record_cost_ns = kDefaultSwitchRecordCostNs;
  return options;
}

StatusOr<analysis::Results> LoadResults(const std::string& path,
                                        const ReportInputOptions& in,
                                        bool* usage_error) {
  return LoadResults(std::vector<std::string>{path}, in, usage_error);
}

StatusOr<analysis::Results> LoadResults(const std::vector<std::string>& paths,
                                        const ReportInputOptions& in,
                                        bool* usage_error) {
  auto opened = model::Session::Open(paths);
  if (!opened.ok())
    return opened.status();
  const std::string& path = (*opened)->path();  // the inputs' names, for messages
  const model::Session& session = **opened;
  const format::TraceReader& reader = session.reader();
  // Bad session metadata is read as absent (not damage): said once, and the report is made.
  const bool quiet = in.group && in.group->rank() != 0;  // a parallel report's other processes
  for (const auto& w : session.warnings())
    if (!quiet)
      fmt::print(stderr, "parmon: {}: {}\n", path, w);
  const std::optional<uint64_t> live_end = in.partial ? std::nullopt : LiveWindowEnd(session);
  if (!in.partial && !live_end) {
    for (const auto& p : reader.problems())
      if (!p.harmless)
        return Status::Error(
            fmt::format("{} is damaged or truncated ({}); use --partial to report what is intact",
                        path, p.message));
    if (!reader.closed_cleanly())
      return Status::Error(fmt::format(
          "{} was not closed cleanly (the recording was cut short); use --partial to report "
          "what it holds",
          path));
  }
  auto parsed = ParseAnalysisOptions(in, usage_error);
  if (!parsed.ok())
    return parsed.status();
  analysis::Options options = *parsed;
  if (!in.interval.empty())
    if (Status s = CheckIntervalCount(session, options, in.interval); !s.ok())
      return UsageError(usage_error, s.message());
  if (live_end) {
    options.to_ns = std::min(options.to_ns, std::max<uint64_t>(*live_end, options.from_ns + 1));
    if (!quiet)
      fmt::print(stderr,
                 "parmon report: {} is not closed (still being written?): reporting its first {}, "
                 "up to which every stream is complete\n",
                 path, analysis::FormatDuration(*live_end));
  }
  auto results = in.group ? parallel::Analyze(*in.group, session, options)
                          : analysis::Analyze(session, options);
  if (!results.ok())
    return results.status();
  if (quiet)
    return results;  // (process 0 checks the damage the others found)
  // Chunks found damaged while reading (payload checksums are checked as they are read).
  if (!in.partial) {
    for (const auto& p : reader.problems())
      if (!p.harmless && (!live_end || !p.tail))
        return Status::Error(fmt::format(
            "{} is damaged ({}); use --partial to report what is intact", path, p.message));
  }
  return results;
}

bool UseColor(const std::string& mode, const std::string& output) {
  if (mode == "always")
    return true;
  if (mode == "never" || !output.empty())
    return false;
  return isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
}

Status WriteOutput(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    fwrite(text.data(), 1, text.size(), stdout);
    return Status::Ok();
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out)
    return Status::Error(fmt::format("cannot write {}", path));
  return Status::Ok();
}

void AddColorOption(CLI::App& app, std::string* color) {
  app.add_option("--color", *color, "auto, always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
}

int WriteOutputOrSay(const char* command, const std::string& path, const std::string& text) {
  Status s = WriteOutput(path, text);
  if (!s.ok()) {
    fmt::print(stderr, "parmon {}: {}\n", command, s.message());
    return 1;
  }
  return 0;
}

namespace {

// The text of a report in the chosen format.
std::string Render(const analysis::Results& results,
                   const std::string& format,
                   const std::string& color,
                   const std::string& output) {
  if (format == "json")
    return analysis::DumpJson(analysis::ToJson(results), 2) + "\n";
  if (format == "csv")
    return analysis::RenderCsv(results);
  if (format == "html")
    return analysis::RenderHtml(results, analysis::BundledChartLibrary());
  analysis::TextOptions to;
  to.color = UseColor(color, output);
  return analysis::RenderText(results, to);
}

// An interim report on a terminal: its first screenful (summary and diagnosis come first), as
// `watch` shows a command's output, with the number of lines left out.
std::string FitScreen(const std::string& text) {
  winsize w{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) != 0 || w.ws_row < 4)
    return text;
  const size_t keep = w.ws_row - 2u;
  size_t at = 0, lines = 0;
  while (lines < keep && (at = text.find('\n', at)) != std::string::npos) {
    ++at;
    ++lines;
  }
  if (at == std::string::npos || at >= text.size())
    return text;
  const size_t rest = static_cast<size_t>(std::count(text.begin() + at, text.end(), '\n'));
  return text.substr(0, at) +
         fmt::format("... {} more lines; the whole report comes when the recording ends", rest);
}

// --follow HOST:PORT/SESSION: the collector keeps the session's analysis as it arrives
// (docs/live.md, "Live analysis"), so each period asks it for its snapshot (QUERY) instead of
// fetching the session and analysing it again here; the final report is the collector's last
// snapshot, which equals `parmon report` of the stored session.
int FollowRemoteReport(const std::string& name,
                       const std::string& format,
                       const std::string& output,
                       uint64_t period_ns) {
  live_view::StopOnInterrupt();
  auto endpoint = live::ParseEndpoint(name);
  if (!endpoint.ok()) {
    fmt::print(stderr, "parmon report: {}\n", endpoint.status().message());
    return 2;
  }
  auto client = live::SnapshotClient::Open(name);
  if (!client.ok()) {
    fmt::print(stderr, "parmon report: {}\n", client.status().message());
    return 1;
  }
  const bool interim = format == "text" && (output.empty() || output == "-");
  const bool tty = interim && isatty(STDOUT_FILENO);
  const std::string& session = endpoint->session;
  std::string last;
  while (!live_view::StopRequested()) {
    auto snap = (*client)->Ask(session, interim ? "text" : format);
    if (!snap.ok()) {
      // The recorder has not connected yet, or not written its first chunk: ask again (as a
      // fetch waits for the session to appear).
      if (live::NotYetThere(snap.status())) {
        live_view::SleepUnlessStopped(period_ns);
        continue;
      }
      fmt::print(stderr, "parmon report: {}: {}\n", name, snap.status().message());
      return 1;
    }
    if (snap->ended || !snap->lost.empty()) {
      if (tty)
        fmt::print("\033[H\033[2J");
      else if (interim)
        fmt::print("=== parmon report {}: the recording has {} ===\n", name,
                   snap->ended ? "ended" : "been lost");
      fflush(stdout);
      if (!snap->ended)  // as a follow of a local trace whose recorder went without closing it
        fmt::print(stderr,
                   "parmon report: the collector says of {}: {}; the report covers what it holds\n",
                   name, snap->lost);
      return WriteOutputOrSay("report", output, snap->body);
    }
    if (interim && snap->body != last) {
      auto meta = nlohmann::json::parse(snap->meta, nullptr, false);
      const uint64_t covered = meta.is_object() ? meta.value("duration_ns", uint64_t{0}) : 0;
      std::string head = fmt::format(
          "parmon report --follow {}: {} recorded so far, still being written (the collector's "
          "live analysis)",
          name, analysis::FormatDuration(covered));
      std::string text =
          tty ? fmt::format("\033[H\033[2J{}\n\n", head) : fmt::format("=== {} ===\n", head);
      text += snap->body;
      if (tty)
        text = FitScreen(text);
      fwrite(text.data(), 1, text.size(), stdout);
      fflush(stdout);
      last = std::move(snap->body);
    }
    live_view::SleepUnlessStopped(period_ns);
  }
  fmt::print(stderr, "parmon report: interrupted before {} ended\n", name);
  return 130;
}

// --follow: every period, the report of what every stream has complete so far (text on
// standard output: the screen cleared on a terminal, a header line between reports otherwise),
// then, once the recorder has closed the session, the report `parmon report FILE` prints. With
// another format or -o, only that final report is written. Each interim report analyses the
// events so far again, so the period stretches to three times the last analysis' time.
int FollowReport(const std::string& path,
                 const ReportInputOptions& in,
                 const std::string& format,
                 const std::string& output,
                 const std::string& color,
                 uint64_t period_ns) {
  bool usage_error = false;
  auto options = ParseAnalysisOptions(in, &usage_error);
  if (!options.ok()) {
    fmt::print(stderr, "parmon report: {}\n", options.status().message());
    return usage_error ? 2 : 1;
  }
  auto opened = live_view::LiveTrace::Follow(path);
  if (!opened.ok()) {
    fmt::print(stderr, "parmon report: {}\n", opened.status().message());
    return 1;
  }
  live_view::LiveTrace& live = **opened;
  const bool interim = format == "text" && (output.empty() || output == "-");
  const bool tty = interim && isatty(STDOUT_FILENO);
  while (!live.ended() && !live_view::StopRequested()) {
    uint64_t wait_ns = period_ns;
    if (interim && live.complete()) {
      const auto t0 = std::chrono::steady_clock::now();
      auto results = live.Analyze(*options);
      const auto took = std::chrono::steady_clock::now() - t0;
      wait_ns = std::max<uint64_t>(
          period_ns, 3 * std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
      if (results.ok()) {
        std::string head =
            fmt::format("parmon report --follow {}: {} recorded so far, still being written", path,
                        analysis::FormatDuration(results->summary.duration_ns));
        std::string text =
            tty ? fmt::format("\033[H\033[2J{}\n\n", head) : fmt::format("=== {} ===\n", head);
        text += Render(*results, format, color, output);
        if (tty)
          text = FitScreen(text);
        fwrite(text.data(), 1, text.size(), stdout);
        fflush(stdout);
      }
    }
    live_view::SleepUnlessStopped(wait_ns);
    if (Status s = live.Refresh(); !s.ok()) {
      fmt::print(stderr, "parmon report: {}\n", s.message());
      return 1;
    }
  }
  if (!live.ended()) {
    // Interrupted: the report of what is complete, said to be partial.
    fmt::print(stderr, "parmon report: interrupted before {} was closed\n", path);
    auto results = live.Analyze(*options);
    if (results.ok())
      WriteOutputOrSay("report", output, Render(*results, format, color, output));
    return 130;
  }
  if (tty)
    fmt::print("\033[H\033[2J");
  else if (interim)
    fmt::print("=== parmon report {}: the recording has ended ===\n", path);
  if (live.abandoned())
    fmt::print(stderr, "parmon report: {}: the report covers every event it wrote\n",
               live.WhyAbandoned());
  fflush(stdout);
  // The followed file: the path itself, or the local copy of a collector's session.
  auto results = LoadResults(live.path(), in, &usage_error);
  if (!results.ok()) {
    fmt::print(stderr, "parmon report: {}\n", results.status().message());
    return usage_error ? 2 : 1;
  }
  return WriteOutputOrSay("report", output, Render(*results, format, color, output));
}

}  // namespace

int RunReport(int argc, char** argv) {
  CLI::App app{
      "Report what each thread and rank did, the communication matrix, intervals, wait "
      "states and a diagnosis.",
      "parmon report"};
  std::string format = "text", output, color = "auto";
  std::vector<std::string> paths;
  ReportInputOptions in;
  app.add_option("file", paths,
                 "trace file, session directory, or - (standard input); several directories or "
                 "rank files are one session recorded on several hosts")
      ->required();
  app.add_option("--format", format, "text, json, csv or html")
      ->check(CLI::IsMember({"text", "json", "csv", "html"}));
  app.add_option("-o,--output", output, "write to this file instead of standard output");
  app.add_option("--from", in.from, "start of the window, from the session start (e.g. 1.5s)");
  app.add_option("--to", in.to, "end of the window, from the session start");
  app.add_option("--interval", in.interval, "interval length (default: about 40 intervals)");
  app.add_flag("--partial", in.partial, "report a damaged or truncated trace from what is intact");
  AddColorOption(app, &color);
  bool follow = false;
  std::string period = "1s";
  app.add_flag("-f,--follow", follow,
               "the trace is still being written: print the report of what has arrived every "
               "period, then the final report when the recording ends");
  app.add_option("--period", period, "with --follow: how often to print (default 1s)");
  if (int rc = ParseCommandLine(app, argc, argv, "report"); rc >= 0)
    return rc;
  if (follow) {
    uint64_t period_ns = 0;
    if (!recorder::ParseDuration(period, &period_ns) || period_ns < 10'000'000) {
      fmt::print(stderr, "parmon report: --period {} is not a duration of 10ms or more\n", period);
      return 2;
    }
    if (paths.size() != 1) {
      fmt::print(stderr, "parmon report: --follow reads one trace or session directory\n");
      return 2;
    }
    // A remote session in a format the collector renders, with the whole run's window: the
    // collector's live analysis answers. Otherwise the session is fetched and analysed here.
    if (live::IsRemoteSession(paths.front()) && (format == "text" || format == "json") &&
        in.from.empty() && in.to.empty() && in.interval.empty() && !in.partial &&
        getenv("PARMON_FOLLOW_LOCAL") == nullptr)
      return FollowRemoteReport(paths.front(), format, output, period_ns);
    return FollowReport(paths.front(), in, format, output, color, period_ns);
  }
  // Under an MPI launcher with several processes (mpirun -np K): the parallel
  // report, process 0 writing it (src/parallel/parallel_report.h).
  std::unique_ptr<parallel::Group> group;
  if (parallel::LauncherSize() > 1) {
    auto joined = parallel::Group::Join(recorder::LibDir());
    if (!joined.ok()) {
      // Process 0 reports alone; the others leave the report to it.
      if (parallel::LauncherRank() != 0)
        return 0;
      fmt::print(stderr, "parmon report: {}; reporting in one process\n",
                 joined.status().message());
    } else {
      group = std::move(*joined);
      in.group = group.get();
    }
  }
  bool usage_error = false;
  auto results = LoadResults(paths, in, &usage_error);
  if (group && group->rank() != 0)
    return results.ok() ? 0 : usage_error ? 2 : 1;
  if (!results.ok()) {
    fmt::print(stderr, "parmon report: {}\n", results.status().message());
    return usage_error ? 2 : 1;
  }
  return WriteOutputOrSay("report", output, Render(*results, format, color, output));
}

}  // namespace parmon::cli
