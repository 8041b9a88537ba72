// parmon scale: runs a command at several process counts under parmon and reports time, speedup,
// efficiency and where the lost efficiency goes. See docs/man/parmon-scale.md.
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <filesystem>

#include <cstdlib>
#include <sstream>

#include "analysis/compare.h"
#include "analysis/json_dump.h"
#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "cli/report_common.h"

namespace parmon::cli {
namespace {

// Runs argv and returns its exit status as a shell reports it (-1 when it could not start).
int RunAndWait(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    // The runs' own output goes to stderr: stdout carries only the scale report (JSON can be
    // piped).
    dup2(STDERR_FILENO, STDOUT_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "parmon";
}

}  // namespace

int RunScale(int argc, char** argv) {
  CLI::App app{
      "Run a command at several process counts under parmon: time, speedup, efficiency "
      "and where the lost efficiency goes. {n} in the command is replaced by the count.",
      "parmon scale"};
  std::string counts = "1,2,4", dir, format = "text", output;
  std::vector<std::string> command;
  app.add_option("-n,--counts", counts, "comma-separated process counts (default 1,2,4)");
  app.add_option("--dir", dir, "keep the traces here (default: a new directory in /tmp)");
  app.add_option("--format", format, "text or json")->check(CLI::IsMember({"text", "json"}));
  app.add_option("-o,--output", output, "write to this file instead of standard output");
  app.add_option("command", command, "command to run; {n} becomes the count")->required();
  app.allow_extras(false);
  app.prefix_command(false);
  if (int rc = ParseCommandLine(app, argc, argv, "scale"); rc >= 0)
    return rc;
  std::vector<int> ns;
  std::stringstream ss(counts);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long v = strtol(item.c_str(), &end, 10);
    if (item.empty() || *end || v <= 0 || v > 1000000) {
      fmt::print(stderr, "parmon scale: -n {} is not a list of positive counts (try 1,2,4,8)\n",
                 counts);
      return 2;
    }
    ns.push_back(static_cast<int>(v));
  }
  if (dir.empty()) {
    char tmpl[] = "/tmp/parmon-scale-XXXXXX";
    if (!mkdtemp(tmpl)) {
      fmt::print(stderr, "parmon scale: cannot create a directory in /tmp\n");
      return 1;
    }
    dir = tmpl;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir)) {
      fmt::print(stderr, "parmon scale: cannot create the directory {}: {}\n", dir,
                 ec ? ec.message() : "a file of that name exists");
      return 1;
    }
  }
  std::vector<analysis::ScalePoint> points;
  for (int n : ns) {
    std::string trace = fmt::format("{}/scale-n{}.ptrace", dir, n);
    std::vector<std::string> argv2 = {SelfPath(), "record", "-q", "-o", trace, "--"};
    for (std::string a : command) {
      for (size_t p; (p = a.find("{n}")) != std::string::npos;)
        a.replace(p, 3, std::to_string(n));
      argv2.push_back(a);
    }
    fmt::print(stderr, "parmon scale: n={}: {}\n", n, trace);
    analysis::ScalePoint point;
    point.n = n;
    point.trace = trace;
    point.exit_code = RunAndWait(argv2);
    auto r = LoadResults(trace, {});
    if (!r.ok()) {
      fmt::print(stderr, "parmon scale: n={}: {}\n", n, r.status().message());
      return 1;
    }
    point.results = std::move(*r);
    points.push_back(std::move(point));
  }
  std::string text = format == "json"
                         ? analysis::DumpJson(analysis::ScaleJson(points), 2) + "\n"
                         : analysis::ScaleText(points) + fmt::format("traces in {}\n", dir);
  return WriteOutputOrSay("scale", output, text);
}

}  // namespace parmon::cli
