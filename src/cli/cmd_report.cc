// parmon report: what each thread and rank did, the communication matrix, intervals, wait states
// and a diagnosis. See docs/man/parmon-report.md.
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "analysis/engine.h"
#include "analysis/json_dump.h"
#include "analysis/units.h"
#include "analysis/views.h"
#include "cli/commands.h"
#include "cli/report_common.h"
#include "model/session.h"
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

StatusOr<analysis::Results> LoadResults(const std::string& path, const ReportInputOptions& in) {
  auto opened = model::Session::Open(path);
  if (!opened.ok())
    return opened.status();
  const model::Session& session = **opened;
  const format::TraceReader& reader = session.reader();
  // Bad session metadata is read as absent (not damage): said once, and the report is made.
  for (const auto& w : session.warnings())
    fmt::print(stderr, "parmon: {}: {}\n", path, w);
  const std::optional<uint64_t> live_end = in.partial ? std::nullopt : LiveWindowEnd(session);
  if (!in.partial && !live_end) {
    if (!reader.problems().empty())
      return Status::Error(
          fmt::format("{} is damaged or truncated ({}); use --partial to report what is intact",
                      path, reader.problems().front().message));
    if (!reader.closed_cleanly())
      return Status::Error(fmt::format(
          "{} was not closed cleanly (the recording was cut short); use --partial to report "
          "what it holds",
          path));
  }
  analysis::Options options;
  if (!in.from.empty() && !recorder::ParseDuration(in.from, &options.from_ns))
    return Status::Error(fmt::format("--from {} is not a duration (try 1.5s or 200ms)", in.from));
  if (!in.to.empty() && !recorder::ParseDuration(in.to, &options.to_ns))
    return Status::Error(fmt::format("--to {} is not a duration (try 1.5s or 200ms)", in.to));
  if (!in.interval.empty() &&
      (!recorder::ParseDuration(in.interval, &options.interval_ns) || options.interval_ns == 0))
    return Status::Error(fmt::format("--interval {} is not a positive duration", in.interval));
  if (options.to_ns <= options.from_ns)
    return Status::Error("--to must be later than --from");
  if (live_end) {
    options.to_ns = std::min(options.to_ns, std::max<uint64_t>(*live_end, options.from_ns + 1));
    fmt::print(stderr,
               "parmon report: {} is not closed (still being written?): reporting its first {}, "
               "up to which every stream is complete\n",
               path, analysis::FormatDuration(*live_end));
  }
  options.default_event_cost_ns = kDefaultEventCostNs;
  auto results = analysis::Analyze(session, options);
  if (!results.ok())
    return results.status();
  // Chunks found damaged while reading (payload checksums are checked as they are read).
  if (!in.partial) {
    for (const auto& p : reader.problems())
      if (!live_end || !p.tail)
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

int RunReport(int argc, char** argv) {
  CLI::App app{
      "Report what each thread and rank did, the communication matrix, intervals, wait "
      "states and a diagnosis.",
      "parmon report"};
  std::string path, format = "text", output, color = "auto";
  ReportInputOptions in;
  app.add_option("file", path, "trace file, session directory, or - (standard input)")->required();
  app.add_option("--format", format, "text, json, csv or html")
      ->check(CLI::IsMember({"text", "json", "csv", "html"}));
  app.add_option("-o,--output", output, "write to this file instead of standard output");
  app.add_option("--from", in.from, "start of the window, from the session start (e.g. 1.5s)");
  app.add_option("--to", in.to, "end of the window, from the session start");
  app.add_option("--interval", in.interval, "interval length (default: about 40 intervals)");
  app.add_flag("--partial", in.partial, "report a damaged or truncated trace from what is intact");
  AddColorOption(app, &color);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto results = LoadResults(path, in);
  if (!results.ok()) {
    fmt::print(stderr, "parmon report: {}\n", results.status().message());
    return 1;
  }
  std::string text;
  if (format == "json") {
    text = analysis::DumpJson(analysis::ToJson(*results), 2) + "\n";
  } else if (format == "csv") {
    text = analysis::RenderCsv(*results);
  } else if (format == "html") {
    text = analysis::RenderHtml(*results, analysis::BundledChartLibrary());
  } else {
    analysis::TextOptions to;
    to.color = UseColor(color, output);
    text = analysis::RenderText(*results, to);
  }
  return WriteOutputOrSay("report", output, text);
}

}  // namespace parmon::cli
