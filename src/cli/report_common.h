// What parmon report, diff and scale share: loading a trace into Results with the same checks
// and options, colour and output handling.
#ifndef PARMON_SRC_CLI_REPORT_COMMON_H_
#define PARMON_SRC_CLI_REPORT_COMMON_H_

#include <string>
#include <vector>

#include "analysis/engine.h"
#include "analysis/results.h"
#include "base/status.h"

namespace CLI {
class App;
}
namespace parmon::parallel {
class Group;
}

namespace parmon::cli {

struct ReportInputOptions {
  std::string from, to, interval;
  bool partial = false;
  // The processes of a parallel report (`mpirun -np K parmon report`), or null: one process.
  // Only process 0 says anything (warnings, errors) and gets the Results.
  const parallel::Group* group = nullptr;
};

// What the report assumes of parmon's cost in the program's threads when the trace does not say
// (analysis/engine.h).
using analysis::kDefaultEventCostNs;
using analysis::kDefaultSwitchRecordCostNs;

// Most intervals a report cuts the run into (--interval): each costs memory per location.
constexpr uint64_t kMaxIntervals = 100'000;
// Most intervals times locations (threads and CPUs): about 128 bytes each in the engine.
constexpr uint64_t kMaxIntervalCells = 4'000'000;

// Opens and analyses a trace; a damaged or truncated one is an error unless in.partial.
// *usage_error (when given) is set when the error is in the options, not the trace (exit 2).
StatusOr<analysis::Results> LoadResults(const std::string& path,
                                        const ReportInputOptions& in,
                                        bool* usage_error = nullptr);
// The same for one session given as several inputs (directories or rank files of several hosts).
StatusOr<analysis::Results> LoadResults(const std::vector<std::string>& paths,
                                        const ReportInputOptions& in,
                                        bool* usage_error = nullptr);
// The analysis options of --from, --to and --interval (and the default event cost), checked.
StatusOr<analysis::Options> ParseAnalysisOptions(const ReportInputOptions& in,
                                                 bool* usage_error = nullptr);
bool UseColor(const std::string& mode, const std::string& output);
Status WriteOutput(const std::string& path, const std::string& text);

// --color auto|always|never, for the commands that print a report.
void AddColorOption(CLI::App& app, std::string* color);
// WriteOutput for a subcommand's last step: 0, or 1 after saying why on stderr as
// "parmon COMMAND: ...".
int WriteOutputOrSay(const char* command, const std::string& path, const std::string& text);

}  // namespace parmon::cli

#endif  // PARMON_SRC_CLI_REPORT_COMMON_H_
