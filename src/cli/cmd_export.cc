// parmon export: a session into OTF2, Perfetto, Chrome JSON or CSV (docs/export.md,
// docs/man/parmon-export.md). The exporters live in src/export; this file reads the command line,
// opens the session and prints a one-line summary, then any damage found, one sentence each.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <chrono>

#include "cli/commands.h"
#include "export/export.h"
#include "model/session.h"
#include "recorder/recorder.h"

namespace parmon::cli {

int RunExport(int argc, char** argv) {
  CLI::App app{
      "Write a trace in a format other tools read: OTF2 (Vampir, Scalasca), Perfetto, "
      "Chrome JSON or CSV.",
      "parmon export"};
  std::string path, format_name, out, from, to;
  app.add_option("file", path, "trace file, session directory, or - (standard input)")->required();
  app.add_option("--format,-f", format_name, "otf2, perfetto, chrome-json or csv")
      ->required()
      ->check(CLI::IsMember({"otf2", "perfetto", "chrome-json", "csv"}));
  app.add_option("-o,--output", out,
                 "output: a directory for otf2 (holding traces.otf2), a file otherwise (- for "
                 "standard output)")
      ->required();
  app.add_option("--from", from, "start of the time range, from the session start (e.g. 1.5s)");
  app.add_option("--to", to, "end of the time range, from the session start");
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "print no summary");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  exporter::ExportOptions options;
  if (!from.empty() && !recorder::ParseDuration(from, &options.from_ns)) {
    fmt::print(stderr, "parmon export: --from {} is not a duration (try 1.5s or 200ms)\n", from);
    return 2;
  }
  if (!to.empty() && !recorder::ParseDuration(to, &options.to_ns)) {
    fmt::print(stderr, "parmon export: --to {} is not a duration (try 1.5s or 200ms)\n", to);
    return 2;
  }
  if (options.to_ns <= options.from_ns) {
    fmt::print(stderr, "parmon export: --to must be later than --from\n");
    return 2;
  }
  if (format_name == "otf2" && out == "-") {
    fmt::print(stderr, "parmon export: an OTF2 archive is a directory; -o names it\n");
    return 2;
  }
  auto opened = model::Session::Open(path);
  if (!opened.ok()) {
    fmt::print(stderr, "parmon export: {}\n", opened.status().message());
    return 1;
  }
  const model::Session& session = **opened;
  for (const auto& w : session.warnings())
    fmt::print(stderr, "parmon export: {}\n", w);
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<exporter::ExportStats> stats = Status::Error("unknown format");
  if (format_name == "otf2")
    stats = exporter::ExportOtf2(session, options, out);
  else if (format_name == "perfetto")
    stats = exporter::ExportPerfetto(session, options, out);
  else if (format_name == "chrome-json")
    stats = exporter::ExportChromeJson(session, options, out);
  else
    stats = exporter::ExportCsv(session, options, out);
  if (!stats.ok()) {
    fmt::print(stderr, "parmon export: {}\n", stats.status().message());
    return 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!quiet && out != "-")
    fmt::print(stderr,
               "parmon export: {} events -> {} {} records in {} ({:.2f} s, {:.0f} events/s)\n",
               stats->events_read, stats->records_written, format_name, out, secs,
               secs > 0 ? static_cast<double>(stats->events_read) / secs : 0.0);
  // Damage: every intact chunk was exported; say what was not.
  for (const auto& p : session.problems())
    fmt::print(stderr, "parmon export: {}\n", p.message);
  return session.problems().empty() ? 0 : 3;
}

}  // namespace parmon::cli
