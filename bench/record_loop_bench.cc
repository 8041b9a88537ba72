// A tight loop recorded end to end (issue 18): bench/record_loop (a loop of rdtsc, then a loop of
// region enter/leave pairs, threads pinned) run under the real `parmon record` with its default
// options, on 1 thread and on 2, round after round. Prints from the same runs: ns per event against
// one rdtsc (1 thread; target <= 1.1x), total events/s (2 threads; target >= 120 M), the events
// lost (block mode: 0), bytes per event of the trace, and the recorder's drain rate per core: the
// ring events it drained over the CPU time of its drains and flushes (END values drain_cpu_ns and
// ring_events; target >= 150 M/s), beside the recorder's whole CPU time (the parmon process's
// rusage less the program's, which parmon waited for) per event.
//
//   record_loop_bench [iterations=20000000] [rounds=5] [--parmon=PATH ...]
//
// Several --parmon builds are run interleaved (A B A B ...) so that the machine's load falls on
// all alike; the default is the parmon beside this benchmark.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "format/reader.h"

namespace {

struct Run {
  double rdtsc_ns = 0, event_ns = 0;  // thread 0's
  double events_per_s = 0;            // all threads, over the region loop's wall time
  double drain_per_core = 0;          // ring events / CPU s of the recorder's drains
  double recorder_per_event_ns = 0;   // the recorder's whole CPU (start-up, sampler, ...) / event
  double recorder_cpu_s = 0;
  uint64_t events = 0, lost = 0;
  double bytes_per_event = 0;
};

double Seconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
}

// Runs argv with stdout captured; its rusage (with its waited-for children) into *ru.
std::string RunCapture(const std::vector<std::string>& args, rusage* ru) {
  int fds[2];
  if (pipe(fds) != 0)
    std::exit(1);
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  pid_t pid = 0;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "record_loop_bench: cannot run %s\n", argv[0]);
    std::exit(1);
  }
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  wait4(pid, &status, 0, ru);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "record_loop_bench: %s failed:\n%s\n", args[0].c_str(), out.c_str());
    std::exit(1);
  }
  return out;
}

double Field(const std::string& out, const std::string& key) {
  size_t at = out.find(key + "=");
  return at == std::string::npos ? 0 : std::atof(out.c_str() + at + key.size() + 1);
}

Run RecordOnce(const std::string& parmon,
               const std::string& prog,
               int threads,
               const std::string& iterations,
               const std::string& trace) {
  rusage ru{};
  std::string out = RunCapture(
      {parmon, "record", "-q", "-o", trace, "--", prog, std::to_string(threads), iterations}, &ru);
  Run r;
  r.rdtsc_ns = Field(out, "rdtsc_ns");
  r.event_ns = Field(out, "event_ns");
  r.events_per_s = Field(out, "events") / Field(out, "region_wall_s");
  r.recorder_cpu_s = Seconds(ru.ru_utime) + Seconds(ru.ru_stime) - Field(out, "self_cpu_s");
  auto reader = parmon::format::TraceReader::Open(trace);
  if (!reader.ok()) {
    std::fprintf(stderr, "record_loop_bench: %s\n", reader.status().message().c_str());
    std::exit(1);
  }
  r.events = (*reader)->total_events();
  r.lost = std::strtoull((*reader)->SessionValue("lost_events", "0").c_str(), nullptr, 10);
  r.bytes_per_event = static_cast<double>(std::filesystem::file_size(trace)) /
                      static_cast<double>(std::max<uint64_t>(r.events, 1));
  const double drain_cpu_s =
      std::strtod((*reader)->SessionValue("drain_cpu_ns", "0").c_str(), nullptr) * 1e-9;
  const double ring_events =
      std::strtod((*reader)->SessionValue("ring_events", "0").c_str(), nullptr);
  r.drain_per_core = ring_events / std::max(drain_cpu_s, 1e-9);
  r.recorder_per_event_ns =
      r.recorder_cpu_s * 1e9 / static_cast<double>(std::max<uint64_t>(r.events, 1));
  std::filesystem::remove(trace);
  return r;
}

template <typename F>
double Median(const std::vector<Run>& runs, F f) {
  std::vector<double> v;
  for (const auto& r : runs)
    v.push_back(f(r));
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int main(int argc, char** argv) {
  // Positional arguments and --parmon=; options of the other benchmarks (scripts/bench.sh passes
  // --benchmark_min_time to every *_bench) are ignored.
  std::vector<std::string> pos, parmons;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--parmon=", 0) == 0)
      parmons.push_back(a.substr(9));
    else if (a.rfind("--", 0) != 0)
      pos.push_back(a);
  }
  const std::string bin = PARMON_BENCH_BIN_DIR;
  if (parmons.empty())
    parmons.push_back(bin + "/parmon");
  const std::string iterations = pos.size() > 0 ? pos[0] : "20000000";
  const int rounds = std::max(1, pos.size() > 1 ? std::atoi(pos[1].c_str()) : 5);
  const std::string prog = bin + "/record_loop";
  const std::string trace =
      (std::filesystem::temp_directory_path() / "parmon-record-loop.ptrace").string();
  std::printf(
      "record_loop under `parmon record` (defaults), %s iterations, %d rounds, "
      "interleaved; load %s\n",
      iterations.c_str(), rounds, LoadAverage().c_str());
  std::map<std::pair<size_t, int>, std::vector<Run>> runs;
  for (int round = 0; round < rounds; ++round)
    for (int threads : {1, 2})
      for (size_t p = 0; p < parmons.size(); ++p)
        runs[{p, threads}].push_back(RecordOnce(parmons[p], prog, threads, iterations, trace));
  std::printf("%-3s %-2s %8s %8s %6s %10s %9s %10s %6s %8s %9s  (medians)\n", "bin", "th",
              "rdtsc ns", "event ns", "ratio", "M ev/s", "B/event", "drain M/s", "lost", "rec cpu",
              "rec ns/ev");
  for (const auto& [key, v] : runs) {
    std::printf("%-3c %-2d %8.2f %8.2f %5.2fx %10.1f %9.3f %10.1f %6.0f %7.3fs %9.2f\n",
                static_cast<char>('A' + key.first), key.second,
                Median(v, [](const Run& r) { return r.rdtsc_ns; }),
                Median(v, [](const Run& r) { return r.event_ns; }),
                Median(v, [](const Run& r) { return r.event_ns / r.rdtsc_ns; }),
                Median(v, [](const Run& r) { return r.events_per_s / 1e6; }),
                Median(v, [](const Run& r) { return r.bytes_per_event; }),
                Median(v, [](const Run& r) { return r.drain_per_core / 1e6; }),
                Median(v, [](const Run& r) { return static_cast<double>(r.lost); }),
                Median(v, [](const Run& r) { return r.recorder_cpu_s; }),
                Median(v, [](const Run& r) { return r.recorder_per_event_ns; }));
  }
  for (size_t p = 0; p < parmons.size(); ++p)
    std::printf("%c = %s\n", static_cast<char>('A' + p), parmons[p].c_str());
  std::printf(
      "targets: ratio <= 1.1x (1 thread), >= 120 M events/s (2 threads), 0 lost, "
      "drain >= 150 M/s per core; load now %s\n"
      "drain M/s: ring events over the CPU time of the recorder's drains and flushes (END "
      "values drain_cpu_ns, ring_events); rec cpu: the parmon process's whole CPU time less the "
      "program's (start-up, sampler, switch records, calibration included), rec ns/ev per event\n",
      LoadAverage().c_str());
  return 0;
}
