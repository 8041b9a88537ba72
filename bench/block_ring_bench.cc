// Block mode with a small ring against the default ring (issues 12 and 18): a thread that only
// enters and leaves a region (threads_regions 1 N) run the way a user runs it, under
// `parmon record --overflow block`, with the default ring and with --buffer-size 64K, and plain,
// the three interleaved round by round (A B C A B C ...) so that the machine's load falls on all
// alike. Prints the median wall time of each, the 64 KiB / default ratio (target <= 2x: a writer
// that finds its ring full is woken as soon as the recorder frees space, and the recorder is
// woken when a ring is half full) and the events recorded and lost in each trace (0 lost: block
// mode never drops).
//
//   block_ring_bench [iterations=5000000] [rounds=7]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "format/reader.h"

namespace {

double WallSeconds(const std::vector<std::string>& args) {
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    freopen("/dev/null", "w", stdout);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "block_ring_bench: %s failed\n", args[0].c_str());
    std::exit(1);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  // Positional arguments; options of the other benchmarks (scripts/bench.sh passes
  // --benchmark_min_time to every *_bench) are ignored.
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--", 0) != 0)
      pos.push_back(argv[i]);
  const std::string iterations = pos.size() > 0 ? pos[0] : "5000000";
  const int rounds = std::max(1, pos.size() > 1 ? std::atoi(pos[1].c_str()) : 7);
  const std::string bin = PARMON_BENCH_BIN_DIR;
  const std::string parmon = bin + "/parmon", prog = bin + "/threads_regions";
  const auto dir = std::filesystem::temp_directory_path();
  const std::string big = (dir / "parmon-block-default.ptrace").string();
  const std::string small = (dir / "parmon-block-64k.ptrace").string();
  std::vector<double> plain, with_default, with_small;
  for (int i = 0; i < rounds; ++i) {
    plain.push_back(WallSeconds({prog, "1", iterations}));
    with_default.push_back(WallSeconds(
        {parmon, "record", "-q", "--overflow", "block", "-o", big, "--", prog, "1", iterations}));
    with_small.push_back(
        WallSeconds({parmon, "record", "-q", "--overflow", "block", "--buffer-size", "64K", "-o",
                     small, "--", prog, "1", iterations}));
  }
  std::printf(
      "block mode, one thread entering and leaving a region %s times, %d interleaved "
      "rounds, median wall time (%u CPUs)\n",
      iterations.c_str(), rounds,
      std::max(1u, static_cast<unsigned>(sysconf(_SC_NPROCESSORS_ONLN))));
  std::printf("%-28s %9s %12s %8s\n", "run", "wall s", "events", "lost");
  std::printf("%-28s %9.3f %12s %8s\n", "plain", Median(plain), "-", "-");
  for (auto [name, trace, walls] : {std::tuple{"default ring", big, &with_default},
                                    std::tuple{"--buffer-size 64K", small, &with_small}}) {
    auto reader = parmon::format::TraceReader::Open(trace);
    if (!reader.ok()) {
      std::fprintf(stderr, "block_ring_bench: %s\n", reader.status().message().c_str());
      return 1;
    }
    std::printf("%-28s %9.3f %12llu %8s\n", name, Median(*walls),
                static_cast<unsigned long long>((*reader)->total_events()),
                (*reader)->SessionValue("lost_events", "0").c_str());
  }
  std::printf("64 KiB ring / default ring: %.2fx (target <= 2x)\n",
              Median(with_small) / Median(with_default));
  std::filesystem::remove(big);
  std::filesystem::remove(small);
  return 0;
}
