// balance: dynamic load balancing from the program's own live efficiencies, in the spirit of the
// transputer process monitor (seed 000), whose programs read each process's processing efficiency
// every second and moved work accordingly. Uses parmon's self-monitoring API (parmon.hpp,
// docs/selfmon.md).
//
// Two workers are pinned to two different CPUs (sched_setaffinity); --spinners busy processes are
// pinned to the second worker's CPU, so that worker gets about 1/(spinners+1) of its CPU and
// queues for the rest. The master hands out --units work units in rounds of --round units:
//   - static: each round is split evenly; every round waits for the slow worker;
//   - balanced: after each round the master reads, through parmon_monitor_read, each worker's
//     running and queued time since its previous read, and splits the next round in proportion to
//     each worker's CPU share running / (running + queued): the worker that gets its CPU gets more
//     work. Not recorded (PARMON_E_NOT_RECORDED), it can only split evenly, and says so.
// Both forms read the monitor every round; only the balanced one uses what it read.
//
// Self-check: every unit was done exactly once. Counts: per worker "worker-<w>", the region
// "round" once per round it worked in; results: seconds, units per worker, the shares read.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include <parmon/parmon.hpp>

#include "common/example.h"

namespace {

using parmon_examples::Location;
using parmon_examples::Region;
using parmon_examples::Scope;

// One unit of work: a chain of dependent multiply-adds (about 0.1-0.2 ms per 50000 steps).
uint64_t Unit(uint64_t k, long steps) {
  uint64_t x = k * 0x9e3779b97f4a7c15ULL + 1, acc = 0;
  for (long i = 0; i < steps; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    acc ^= x >> 17;
  }
  return acc;
}

bool Pin(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one) == 0;  // 0: the calling thread
}

}  // namespace

int main(int argc, char** argv) {
  parmon_examples::Options options(
      "balance",
      "Two workers, one sharing its CPU with spinners: static or balanced from parmon's "
      "self-monitoring figures (seed 000).");
  options.AddChoice("form", "balanced", {"static", "balanced"},
                    "split rounds evenly, or by each worker's CPU share read from parmon");
  options.AddInt("units", 6000, 1, 100000000, "work units in all");
  options.AddInt("round", 400, 2, 100000000, "units handed out per round");
  options.AddInt("steps", 50000, 1, 1000000000, "multiply-adds per unit (~1 ns each)");
  options.AddInt("spinners", 4, 0, 64, "busy processes sharing the second worker's CPU");
  options.Parse(argc, argv);
  const bool balanced = options.String("form") == "balanced";
  const long units = options.Int("units"), round_units = options.Int("round");
  const long steps = options.Int("steps"), spinners = options.Int("spinners");

  // Two CPUs this process may use: the first for worker 0, the second for worker 1 and spinners.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof allowed, &allowed);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &allowed))
      cpus.push_back(c);
  if (cpus.size() < 2) {
    fprintf(stderr, "balance: needs two CPUs it may run on; it may use %zu\n", cpus.size());
    return 2;
  }

  constexpr int kWorkers = 2;
  struct Worker {
    Location location;
    std::atomic<int32_t> tid{0};
    bool pinned = false;
    long lo = 0, hi = 0;  // this round's units
    long done = 0;
    uint64_t checksum = 0;
  };
  std::vector<Worker> workers(kWorkers);
  std::vector<uint8_t> done(static_cast<size_t>(units), 0);
  std::mutex mu;
  std::condition_variable cv;
  long round = 0;  // guarded by mu: bumped by the master to start a round, -1 to stop
  int pending = 0;

  auto work = [&](int w) {
    static const Region round_region("round");
    Worker& me = workers[w];
    me.location.thread = "worker-" + std::to_string(w);
    parmon_thread_name(me.location.thread.c_str());
    me.pinned = Pin(cpus[w]);
    me.tid.store(parmon_thread_id());
    long seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return round != seen; });
        if (round < 0)
          return;
        seen = round;
      }
      if (me.hi > me.lo) {
        Scope s(me.location, round_region);
        for (long k = me.lo; k < me.hi; ++k) {
          me.checksum += Unit(static_cast<uint64_t>(k), steps);
          ++done[static_cast<size_t>(k)];
        }
        me.done += me.hi - me.lo;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (--pending == 0)
        cv.notify_all();
    }
  };
  // The spinners are processes of their own sessions, not threads of this one: with the kernel's
  // autogroup scheduling (sched_autogroup_enabled, on in most distributions) a session's CPU
  // share is split among the CPUs its threads are runnable on, so spinner threads here would
  // move this session's share to the second CPU and starve the first worker instead.
  std::vector<pid_t> spin;
  const pid_t parent = getpid();
  for (long s = 0; s < spinners; ++s) {
    const pid_t child = fork();
    if (child == 0) {
      setsid();
      Pin(cpus[1]);
      for (unsigned long k = 1;; ++k)
        if (k % (1ul << 24) == 0 && getppid() != parent)
          _exit(0);  // the parent is gone
    }
    if (child > 0)
      spin.push_back(child);
  }
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w)
    threads.emplace_back(work, w);
  for (Worker& w : workers)
    while (w.tid.load() == 0)
      std::this_thread::yield();

  parmon::Monitor monitor;
  for (Worker& w : workers)
    monitor.Watch(w.tid.load());
  if (!monitor.ok())
    printf("balance: not recorded by parmon (error %d): the work can only be split evenly\n",
           monitor.error());
  monitor.Read();  // the baseline: the next read covers the first round

  double weight[kWorkers] = {1, 1};
  bool seen_share[kWorkers] = {false, false};
  nlohmann::json shares_read = nlohmann::json::array();
  const double t0 = parmon_examples::Now();
  long next = 0, rounds = 0;
  while (next < units) {
    const long n = std::min(round_units, units - next);
    {
      std::unique_lock<std::mutex> lock(mu);
      const long n0 = std::lround(static_cast<double>(n) * weight[0] / (weight[0] + weight[1]));
      workers[0].lo = next;
      workers[0].hi = next + n0;
      workers[1].lo = next + n0;
      workers[1].hi = next + n;
      next += n;
      pending = kWorkers;
      ++round;
      cv.notify_all();
      cv.wait(lock, [&] { return pending == 0; });
    }
    ++rounds;
    // What parmon booked for each worker since the previous read (this round, give or take the
    // sampler's period at either end).
    const auto& figures = monitor.Read();
    nlohmann::json row = nlohmann::json::array();
    for (int w = 0; w < kWorkers && w < static_cast<int>(figures.size()); ++w) {
      const parmon_thread_figures& f = figures[w];
      const double share = parmon::Monitor::CpuShare(f);
      const uint64_t wanted = f.states_ns[PARMON_STATE_RUNNING] + f.states_ns[PARMON_STATE_QUEUED];
      row.push_back(share);
      // Enough running or queued time to tell (2 ms): the next round follows the share, smoothed
      // over the rounds (half the latest, half the past) against a round's bad luck.
      if (balanced && share > 0 && wanted >= 2'000'000) {
        weight[w] = seen_share[w] ? 0.5 * weight[w] + 0.5 * share : share;
        weight[w] = std::max(weight[w], 0.02);
        seen_share[w] = true;
      }
    }
    shares_read.push_back(row);
  }
  const double seconds = parmon_examples::Now() - t0;
  {
    std::lock_guard<std::mutex> lock(mu);
    round = -1;
    cv.notify_all();
  }
  for (auto& t : threads)
    t.join();
  for (pid_t child : spin) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }

  const bool all_once = std::all_of(done.begin(), done.end(), [](uint8_t d) { return d == 1; });
  bool pinned = workers[0].pinned && workers[1].pinned;
  parmon_examples::Report report;
  report.example = "balance";
  report.params = {{"form", options.String("form")}, {"units", units},
                   {"round", round_units},           {"steps", steps},
                   {"spinners", spinners},           {"cpus", cpus}};
  report.results = {{"seconds", seconds},
                    {"rounds", rounds},
                    {"recorded", monitor.ok()},
                    {"units", {workers[0].done, workers[1].done}},
                    {"shares_read", shares_read}};
  for (const Worker& w : workers)
    report.locations.push_back(w.location.ToJson());
  report.ok = all_once && pinned;
  printf(
      "balance: %s form, %ld units in %ld rounds in %.3f s; worker 0 (CPU %d) did %ld, worker 1 "
      "(CPU %d, with %ld spinners) %ld%s\n",
      options.String("form").c_str(), units, rounds, seconds, cpus[0], workers[0].done, cpus[1],
      spinners, workers[1].done, all_once ? "" : "; units NOT done exactly once");
  if (!report.Write(options.String("counts")))
    return 1;
  return report.ok ? 0 : 1;
}
