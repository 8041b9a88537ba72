// live_rank_bench: what a question about a live per-rank MPI session costs the collector (issue
// 14, docs/live.md "The live analysis").
//
// Starts `parmon serve` on 127.0.0.1 (port 0) and `mpirun -np RANKS parmon record --to
// 127.0.0.1:PORT/job -- saturation --rounds N --bytes 64`, and asks for the session's JSON
// snapshot every PERIOD while the ranks run, then once more for the final one. For each answer it
// prints the collector's figures from the WELCOME (incremental or not, snapshot_ns, cpu_ns, events)
// and, as an independent oracle, the collector process's CPU time since the previous question
// (utime + stime from /proc/PID/stat). `--parmon PATH` runs another build's parmon (main's, to
// compare): the client speaks the same protocol.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_spawn.h"
#include "live/client.h"

namespace {

using parmon::bench::Slurp;
using parmon::bench::Spawn;

// utime + stime of a process in ns.
uint64_t ProcessCpuNs(pid_t pid) {
  std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos)
    return 0;
  std::istringstream in(stat.substr(paren + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14)
      utime = std::stoull(field);
    if (i == 15)
      stime = std::stoull(field);
  }
  return (utime + stime) * (1'000'000'000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK)));
}

double Loadavg() {
  double l = 0;
  std::ifstream("/proc/loadavg") >> l;
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  std::string parmon = std::string(PARMON_BENCH_BIN_DIR) + "/parmon";
  std::string program = std::string(PARMON_BENCH_BIN_DIR) + "/saturation";
  int rounds = 40000, ranks = 3;
  double period = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--parmon")
      parmon = argv[i + 1];
    else if (a == "--rounds")
      rounds = atoi(argv[i + 1]);
    else if (a == "--ranks")
      ranks = atoi(argv[i + 1]);
    else if (a == "--every")
      period = atof(argv[i + 1]);
    else {
      fprintf(stderr,
              "usage: live_rank_bench [--parmon PATH] [--rounds N] [--ranks N] [--every S]\n");
      return 2;
    }
  }
  char tmpl[] = "/tmp/live_rank_bench_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  pid_t serve = Spawn({parmon, "serve", "--listen", "127.0.0.1:0", "--store", dir + "/store"},
                      dir + "/serve.out", dir + "/serve.log");
  int port = 0;
  for (int i = 0; i < 3000 && port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    port = atoi(Slurp(dir + "/serve.out").c_str());
  }
  const std::string addr = "127.0.0.1:" + std::to_string(port);
  printf("parmon %s, %d ranks, saturation --rounds %d, asking every %.1f s, load %.2f\n",
         parmon.c_str(), ranks, rounds, period, Loadavg());
  auto client = parmon::live::SnapshotClient::Open(addr);
  if (!client.ok()) {
    fprintf(stderr, "%s\n", client.status().message().c_str());
    return 1;
  }
  pid_t job = Spawn({"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
                     std::to_string(ranks), parmon, "record", "-q", "--to", addr + "/job", "--",
                     program, "--rounds", std::to_string(rounds), "--bytes", "64"},
                    dir + "/mpirun.out", dir + "/mpirun.err");
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t cpu_before = ProcessCpuNs(serve);
  printf("%8s %5s %11s %12s %12s %16s\n", "t_s", "incr", "events", "snapshot_ms", "worker_ms",
         "collector_cpu_ms");
  bool running = true;
  for (int asked = 0;; ++asked) {
    std::this_thread::sleep_for(std::chrono::duration<double>(period));
    if (running && waitpid(job, nullptr, WNOHANG) == job)
      running = false;
    auto snap = (*client)->Ask("job", "json", 120);
    const uint64_t cpu = ProcessCpuNs(serve);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!snap.ok()) {
      printf("%8.1f  (%s)\n", t, snap.status().message().c_str());
      cpu_before = cpu;
      if (!running && asked > 600)
        break;
      continue;
    }
    auto m = nlohmann::json::parse(snap->meta);
    printf("%8.1f %5s %11llu %12.2f %12.1f %16.1f%s\n", t,
           m.value("incremental", false) ? "yes" : "no",
           static_cast<unsigned long long>(m.value("events", 0ull)),
           static_cast<double>(m.value("snapshot_ns", 0ull)) / 1e6,
           static_cast<double>(m.value("cpu_ns", 0ull)) / 1e6,
           static_cast<double>(cpu - cpu_before) / 1e6, snap->ended ? "  (final)" : "");
    fflush(stdout);
    cpu_before = cpu;
    if (snap->ended)
      break;
  }
  printf("collector CPU in all: %.1f ms, load %.2f\n",
         static_cast<double>(ProcessCpuNs(serve)) / 1e6, Loadavg());
  kill(serve, SIGTERM);
  waitpid(serve, nullptr, 0);
  if (!getenv("PARMON_KEEP_BENCH_FILES"))
    std::filesystem::remove_all(dir);
  return 0;
}
