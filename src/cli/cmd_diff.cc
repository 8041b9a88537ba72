// parmon diff: the same run before and after a change, side by side. See docs/man/parmon-diff.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "analysis/compare.h"
#include "analysis/json_dump.h"
#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "cli/report_common.h"

namespace parmon::cli {

int RunDiff(int argc, char** argv) {
  CLI::App app{"Compare two runs (before and after a change): what got better or worse.",
               "parmon diff"};
  std::string a_path, b_path, format = "text", output, color = "auto";
  ReportInputOptions in;
  app.add_option("a", a_path, "trace before the change")->required();
  app.add_option("b", b_path, "trace after the change")->required();
  app.add_option("--format", format, "text or json")->check(CLI::IsMember({"text", "json"}));
  app.add_option("-o,--output", output, "write to this file instead of standard output");
  app.add_flag("--partial", in.partial, "accept damaged or truncated traces");
  AddColorOption(app, &color);
  if (int rc = ParseCommandLine(app, argc, argv, "diff"); rc >= 0)
    return rc;
  auto a = LoadResults(a_path, in);
  if (!a.ok()) {
    fmt::print(stderr, "parmon diff: {}\n", a.status().message());
    return 1;
  }
  auto b = LoadResults(b_path, in);
  if (!b.ok()) {
    fmt::print(stderr, "parmon diff: {}\n", b.status().message());
    return 1;
  }
  std::string text = format == "json" ? analysis::DumpJson(analysis::CompareJson(*a, *b), 2) + "\n"
                                      : analysis::CompareText(*a, *b, UseColor(color, output));
  return WriteOutputOrSay("diff", output, text);
}

}  // namespace parmon::cli
