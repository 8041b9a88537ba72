// parmon demo: records the bundled ring-pipeline example (examples/ring_search, the free-text
// retrieval farm of the Hathi-2 case study) in its slow form on 8 MPI ranks, then shows the
// report with its diagnosis and writes the HTML report. The same steps as scripts/demo.sh, for
// an installed parmon: the examples are looked up next to this executable (the build tree) and
// in ../libexec/parmon/examples (the install tree). Without mpirun (or with --pipes) it records
// the same farm as forked processes joined by pipes (ring_search_pipes). See docs/examples.md.
#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/cli_errors.h"
#include "cli/commands.h"

namespace parmon::cli {
namespace {

namespace fs = std::filesystem;

// Where the example programs are: $PARMON_EXAMPLES_DIR, then the install and build layouts
// relative to this executable. Empty when none has ring_search_pipes (built with or without MPI).
fs::path FindExamples() {
  std::vector<fs::path> candidates;
  if (const char* dir = getenv("PARMON_EXAMPLES_DIR"))
    candidates.emplace_back(dir);
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(self.parent_path().parent_path() / "libexec" / "parmon" / "examples");
    candidates.push_back(self.parent_path());
  }
  for (const auto& dir : candidates)
    if (access((dir / "ring_search_pipes").c_str(), X_OK) == 0)
      return dir;
  return {};
}

// The first `name` on PATH that can be executed, or "".
std::string FindOnPath(const std::string& name) {
  const char* path = getenv("PATH");
  std::string rest = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find(':', start);
    if (end == std::string::npos)
      end = rest.size();
    std::string candidate = rest.substr(start, end - start) + "/" + name;
    if (end > start && access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

// Calls a subcommand in this process with argv[0] = its name, echoing it as a shell line.
int Subcommand(int (*run)(int, char**), std::vector<std::string> args) {
  fmt::print("\n$ parmon");
  for (const auto& a : args)
    fmt::print(" {}", a);
  fmt::print("\n");
  fflush(stdout);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  return run(static_cast<int>(args.size()), argv.data());
}

}  // namespace

int RunDemo(int argc, char** argv) {
  CLI::App app{
      "Record the bundled ring-pipeline example (the Hathi-2 free-text retrieval farm, "
      "slow form) on 8 MPI ranks and show parmon's report and diagnosis.",
      "parmon demo"};
  std::string dir = "parmon-demo", form = "slow";
  int ranks = 8, words = 500, db_kb = 512;
  app.add_option("-d,--dir", dir, "where to write the trace and the HTML report")
      ->capture_default_str();
  app.add_option("--ranks", ranks, "MPI ranks (or processes): the master and ranks-1 workers")
      ->check(CLI::Range(2, 256))
      ->capture_default_str();
  app.add_option("--form", form, "slow (the master's logical error) or fixed")
      ->check(CLI::IsMember({"slow", "fixed"}))
      ->capture_default_str();
  app.add_option("--words", words, "search words")
      ->check(CLI::Range(1, 10000000))
      ->capture_default_str();
  app.add_option("--db-kb", db_kb, "text database size in KiB")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  bool pipes = false;
  app.add_flag("--pipes", pipes,
               "without MPI: the same farm as forked processes joined by pipes "
               "(chosen anyway when mpirun is not on PATH)");
  if (int rc = ParseCommandLine(app, argc, argv, "demo"); rc >= 0)
    return rc;

  fs::path examples = FindExamples();
  if (examples.empty()) {
    fmt::print(stderr,
               "parmon demo: cannot find the example programs (looked next to parmon and in "
               "../libexec/parmon/examples; set PARMON_EXAMPLES_DIR to their directory)\n");
    return 1;
  }
  std::string mpirun = pipes ? "" : FindOnPath("mpirun");
  if (mpirun.empty() && !pipes) {
    fmt::print(stderr,
               "parmon demo: mpirun is not on PATH, so the farm runs as processes joined by "
               "pipes (for MPI: apt-get install openmpi-bin libopenmpi-dev)\n");
    pipes = true;
  }
  if (!pipes && access((examples / "ring_search").c_str(), X_OK) != 0) {
    fmt::print(stderr,
               "parmon demo: the MPI example was not built (no MPI when parmon was built), so the "
               "farm runs as processes joined by pipes\n");
    pipes = true;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    fmt::print(stderr, "parmon demo: cannot create {}: {}\n", dir, ec.message());
    return 1;
  }
  std::string trace = (fs::path(dir) / "demo.ptrace").string();
  std::string html = (fs::path(dir) / "demo.html").string();

  fmt::print(
      "parmon demo: the free-text retrieval farm of Aspnas & Langbacka (Hathi-2, 1990) on a\n"
      "unidirectional ring of {} {}: number 0 hands out search words, 1..{} search\n"
      "their share of the text and pass the results along the ring to 0.\n{}\n",
      ranks, pipes ? "processes joined by pipes" : "MPI ranks", ranks - 1,
      form == "slow" ? "Slow form: the master waits for every answer before it hands out the next\n"
                       "word, so the ring drains for every word and the workers queue to send."
                     : "Fixed form: the master keeps handing out words while it collects answers.");
  std::vector<std::string> record = {"record", "-q", "-o", trace, "--"};
  if (pipes) {
    record.push_back((examples / "ring_search_pipes").string());
    record.push_back("--workers");
    record.push_back(std::to_string(ranks - 1));
  } else {
    record.push_back(mpirun);
    if (geteuid() == 0)
      record.push_back("--allow-run-as-root");
    for (std::string a : {"--oversubscribe", "-np"})
      record.push_back(a);
    record.push_back(std::to_string(ranks));
    record.push_back((examples / "ring_search").string());
  }
  for (std::string a : {"--form", form.c_str(), "--words"})
    record.push_back(a);
  record.push_back(std::to_string(words));
  record.push_back("--db-kb");
  record.push_back(std::to_string(db_kb));
  int status = Subcommand(RunRecord, record);
  if (status != 0) {
    fmt::print(stderr, "parmon demo: the recorded run failed (exit status {})\n", status);
    return 1;
  }
  status = Subcommand(RunReport, {"report", trace});
  if (status != 0)
    return status;
  status = Subcommand(RunReport, {"report", "--format", "html", "-o", html, trace});
  if (status != 0)
    return status;
  fmt::print("\nHTML report: {}\n", fs::absolute(html).string());
  return 0;
}

}  // namespace parmon::cli
