// Command-line errors, said the same way by every subcommand: one line "parmon <cmd>: <what>",
// the closest option suggested for a misspelling, exit code 2 (kUsageExit). CLI11 reports its
// parse errors on two lines without the prefix and exits 104-109; ParseCommandLine() is the one
// place that turns them into parmon's form, so each cmd_*.cc calls it instead of app.exit().
#ifndef PARMON_SRC_CLI_CLI_ERRORS_H_
#define PARMON_SRC_CLI_CLI_ERRORS_H_

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace parmon::cli {

// Exit code of every usage error (bad option, bad value, missing argument).
constexpr int kUsageExit = 2;

// Parses argv. -1 when the command line is good; otherwise the code to exit with, after printing
// the help (0, for --help) or one line "parmon <command>: <error>" (kUsageExit).
int ParseCommandLine(CLI::App& app, int argc, char** argv, const std::string& command);

// The candidate closest to `word` by edit distance, or "" when none is close enough to be a
// misspelling of it.
std::string ClosestWord(const std::string& word, const std::vector<std::string>& candidates);

// The long option of app closest to `word` ("--outptu" -> "--output"), or "" when none is close.
std::string ClosestOption(const CLI::App& app, const std::string& word);

// Prints "parmon <command>: unknown option <word> (did you mean <closest>?)" and returns
// kUsageExit.
int UnknownOption(const CLI::App& app, const std::string& command, const std::string& word);

}  // namespace parmon::cli

#endif  // PARMON_SRC_CLI_CLI_ERRORS_H_
