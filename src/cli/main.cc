// parmon: run-time performance monitor for parallel programs.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/cli_errors.h"
#include "cli/commands.h"

namespace parmon::cli {
namespace {

const Command kCommands[] = {
    {"record", "run a command and record its threads, processes and ranks", RunRecord},
    {"info", "summarise a trace: session, threads, events, losses", RunInfo},
    {"dump", "print every event of a trace in time order", RunDump},
    {"report", "what each thread and rank did, communication, waits and a diagnosis", RunReport},
    {"diff", "compare two runs: what got better or worse", RunDiff},
    {"export", "write a trace as OTF2, Perfetto, Chrome JSON or CSV for other tools", RunExport},
    {"scale", "run a command at several process counts: speedup and where it goes", RunScale},
    {"demo", "record a bundled MPI example (a ring pipeline) and show its report", RunDemo},
    {"top", "watch a recording live: thread states, CPUs, links, findings", RunTop},
    {"serve", "collect sessions streamed by record --to and serve them live", RunServe},
    {"fetch", "copy a session from a collector (parmon serve) to a local trace", RunFetch},
    {"ctl", "steer a running recorder: pause, resume, period, threads, streams", RunCtl},
    {"view", "serve a trace's timeline, CPU view and findings to a web browser", RunView},
};

int Usage(FILE* out) {
  fmt::print(out, "usage: parmon <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands)
    fmt::print(out, "  {:<8} {}\n", c.name, c.summary);
  fmt::print(out, "\n'parmon <command> --help' describes a command's options.\n");
  return out == stderr ? 2 : 0;
}

}  // namespace
}  // namespace parmon::cli

int main(int argc, char** argv) {
  using namespace parmon::cli;
  if (argc < 2)
    return Usage(stderr);
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))
    return Usage(stdout);
  if (!strcmp(argv[1], "--version")) {
    fmt::print("parmon {}\n", PARMON_VERSION);
    return 0;
  }
  for (const auto& c : kCommands)
    if (!strcmp(argv[1], c.name))
      return c.run(argc - 1, argv + 1);
  std::vector<std::string> names;
  for (const auto& c : kCommands)
    names.push_back(c.name);
  const std::string closest = ClosestWord(argv[1], names);
  fmt::print(stderr, "parmon: '{}' is not a parmon command ({}'parmon --help' lists them)\n",
             argv[1], closest.empty() ? "" : fmt::format("did you mean {}? ", closest));
  return kUsageExit;
}
