// End-to-end tests of the system monitor: run examples/duty_cycle (threads whose behaviour is
// known by construction and which measure their own truth) under `parmon record`, and compare
// what the sampler and the context-switch recorder wrote with that truth and with the kernel's
// own counters in /proc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "format/reader.h"
#include "support/e2e.h"

extern char** environ;

namespace parmon::testing {
namespace {

using format::Event;
using format::Kind;

// The events of a trace by thread id, each in time order.
struct Trace {
  std::map<std::string, std::string> session;
  std::map<uint32_t, std::vector<Event>> by_tid;
  std::vector<Event> cpu_events;
  std::set<uint32_t> sampled_tids, switch_tids;

  size_t Count(uint32_t tid, Kind kind) const {
    auto it = by_tid.find(tid);
    if (it == by_tid.end())
      return 0;
    size_t n = 0;
    for (const auto& e : it->second)
      n += e.kind_enum() == kind;
    return n;
  }
  size_t CountAll(Kind kind) const {
    size_t n = 0;
    for (const auto& [tid, v] : by_tid)
      n += Count(tid, kind);
    return n;
  }
};

Trace Load(const std::string& path) {
  Trace t;
  auto reader = format::TraceReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status().message();
  if (!reader.ok())
    return t;
  auto& r = **reader;
  t.session = r.session();
  for (const auto& s : r.streams()) {
    auto loc = r.definitions().locations.find(s.location);
    if (loc == r.definitions().locations.end())
      continue;
    for (const auto& ref : s.chunks) {
      format::DecodedChunk chunk;
      if (!r.ReadChunk(ref, &chunk).ok())
        continue;
      for (Event e : chunk.events) {
        e.payload = {};
        e.source = s.source;
        if (loc->second.type == format::LocationType::kCpu) {
          e.location = loc->second.tid;  // the CPU number
          t.cpu_events.push_back(e);
          continue;
        }
        if (s.source == format::Source::kSampler)
          t.sampled_tids.insert(loc->second.tid);
        if (s.source == format::Source::kSched)
          t.switch_tids.insert(loc->second.tid);
        t.by_tid[loc->second.tid].push_back(e);
      }
    }
  }
  for (auto& [tid, v] : t.by_tid)
    std::stable_sort(v.begin(), v.end(),
                     [](const Event& a, const Event& b) { return a.ts < b.ts; });
  return t;
}

std::string DutyCycle() {
  return BinDir() + "/duty_cycle";
}

// Fractions of [from, to] per ThreadStates arg, intervals clipped proportionally.
std::array<double, 8> StateFractions(const Trace& t, uint32_t tid, uint64_t from, uint64_t to) {
  std::array<double, 8> ns{};
  auto it = t.by_tid.find(tid);
  if (it == t.by_tid.end() || to <= from)
    return ns;
  double covered = 0;
  for (const auto& e : it->second) {
    if (e.kind_enum() != Kind::kThreadStates || e.source != format::Source::kSampler)
      continue;
    uint64_t len = 0;
    for (int i = 0; i < 8; ++i)
      len += e.args[i];
    if (len == 0)
      continue;
    uint64_t b = e.ts - len, end = e.ts;
    uint64_t lo = std::max(b, from), hi = std::min(end, to);
    if (hi <= lo)
      continue;
    double share = static_cast<double>(hi - lo) / static_cast<double>(len);
    covered += static_cast<double>(hi - lo);
    for (int i = 0; i < 8; ++i)
      ns[i] += share * static_cast<double>(e.args[i]);
  }
  for (auto& v : ns)
    v = covered > 0 ? v / covered : 0;
  // The samples must cover nearly the whole window, or the fractions mean little.
  EXPECT_GT(covered, 0.9 * static_cast<double>(to - from)) << "tid " << tid;
  return ns;
}

constexpr int kRunning = 0, kRunnable = 1, kComm = 2, kLock = 3, kTimer = 4;

// Time the hypervisor took from this machine's CPUs so far (all CPUs, /proc/stat's steal
// column, in clock ticks). A thread's CPU time leaves it out while the switch records, which
// are wall-clock times, count it as on a CPU.
uint64_t StealNs() {
  std::istringstream in(ReadFile("/proc/stat"));
  std::string cpu;
  uint64_t v[8] = {};
  in >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
  if (cpu != "cpu")
    return 0;
  return v[7] * (1'000'000'000ull / static_cast<uint64_t>(sysconf(_SC_CLK_TCK)));
}

struct Recorded {
  RunResult run;
  Trace trace;
  std::vector<Truth> truth;
  uint64_t steal_ns = 0;  // over the recording (see StealNs)
  // The share of the machine's CPU time the hypervisor took over the threads' loops: a thread
  // whose CPU is taken while it runs is running for parmon and for its switch records, but its
  // own CPU clock stops. Fractions are compared with that much more slack.
  // Slack for a CPU-time comparison: the steal seen, and a clock tick more when there was any
  // (the counter moves in ticks).
  double StolenNs() const { return steal_ns == 0 ? 0 : static_cast<double>(steal_ns) + 10e6; }
  double StolenShare() const {
    uint64_t from = UINT64_MAX, to = 0;
    for (const Truth& t : truth) {
      from = std::min(from, t.start);
      to = std::max(to, t.end);
    }
    if (steal_ns == 0 || to <= from)
      return 0;
    double cpus = static_cast<double>(sysconf(_SC_NPROCESSORS_ONLN));
    return std::min(1.0, static_cast<double>(steal_ns) / (cpus * static_cast<double>(to - from)));
  }
};

Recorded RecordDuty(const TempDir& dir,
                    const std::vector<std::string>& opts,
                    const std::vector<std::string>& program_args) {
  Recorded r;
  std::vector<std::string> args = {"record", "-q", "-o", dir.File("t.ptrace")};
  args.insert(args.end(), opts.begin(), opts.end());
  args.push_back("--");
  args.push_back(DutyCycle());
  args.insert(args.end(), program_args.begin(), program_args.end());
  const uint64_t steal = StealNs();
  r.run = Parmon(args);
  r.steal_ns = StealNs() - steal;
  r.trace = Load(dir.File("t.ptrace"));
  r.truth = ParseTruth(r.run.out);
  return r;
}

bool ClockIsMonotonic(const Trace& t) {
  auto it = t.session.find("clock_base");
  if (it == t.session.end())
    ADD_FAILURE() << "the trace's session has no clock_base";
  return it != t.session.end() && it->second == "monotonic";
}

TEST(SchedE2E, StateFractionsMatchWhatTheThreadsDid) {
  TempDir dir;
  Recorded r = RecordDuty(dir, {"-t", "10ms"}, {"--seconds", "3", "basic"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  ASSERT_EQ(r.truth.size(), 5u) << r.run.out;
  if (!ClockIsMonotonic(r.trace))
    GTEST_SKIP() << "the session clock is not CLOCK_MONOTONIC here";
  std::printf("steal over the loops: %.2f%% of the CPUs\n", 100 * r.StolenShare());
  for (const Truth& t : r.truth) {
    SCOPED_TRACE(t.role + " tid " + std::to_string(t.tid));
    double wall = static_cast<double>(t.end - t.start);
    double running = static_cast<double>(t.cpu) / wall;  // CPU time over the loop
    double waiting = static_cast<double>(t.blocked) / wall;
    double runnable = std::max(0.0, 1.0 - running - waiting);
    auto f = StateFractions(r.trace, t.tid, t.start, t.end);
    int wait_state = t.role == "sleeper" ? kTimer : t.role == "pipe_reader" ? kComm : kLock;
    double parmon_wait = t.role == "spinner" ? f[kComm] + f[kLock] + f[kTimer] : f[wait_state];
    std::printf(
        "%-12s truth run %.3f queued %.3f wait %.3f | parmon run %.3f queued %.3f wait %.3f\n",
        t.role.c_str(), running, runnable, waiting, f[kRunning], f[kRunnable], parmon_wait);
    EXPECT_NEAR(f[kRunning], running, 0.05 + r.StolenShare());
    EXPECT_NEAR(f[kRunnable], runnable, 0.05 + r.StolenShare());
    EXPECT_NEAR(parmon_wait, waiting, 0.05);
  }
}

TEST(SchedE2E, FourSpinnersOnTwoCpusAreQueuedForWhatTheyDidNotRun) {
  TempDir dir;
  Recorded r = RecordDuty(dir, {"-t", "10ms"}, {"--seconds", "3", "oversub"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  ASSERT_EQ(r.truth.size(), 4u) << r.run.out;
  if (!ClockIsMonotonic(r.trace))
    GTEST_SKIP() << "the session clock is not CLOCK_MONOTONIC here";
  std::printf("steal over the loops: %.2f%% of the CPUs\n", 100 * r.StolenShare());
  for (const Truth& t : r.truth) {
    SCOPED_TRACE("tid " + std::to_string(t.tid));
    double running = static_cast<double>(t.cpu) / static_cast<double>(t.end - t.start);
    auto f = StateFractions(r.trace, t.tid, t.start, t.end);
    std::printf("spinner truth run %.3f queued %.3f | parmon run %.3f queued %.3f\n", running,
                1 - running, f[kRunning], f[kRunnable]);
    EXPECT_NEAR(f[kRunning], running, 0.05 + r.StolenShare());
    EXPECT_NEAR(f[kRunnable], 1.0 - running, 0.05 + r.StolenShare());
  }
}

// perf's switch records against the kernel's own counters and CPU time, at the instant each thread
// read them.
void CheckSwitchesAgainstProc(const Recorded& r) {
  for (const Truth& t : r.truth) {
    SCOPED_TRACE(t.role + " tid " + std::to_string(t.tid));
    auto it = r.trace.by_tid.find(t.tid);
    ASSERT_NE(it, r.trace.by_tid.end());
    uint64_t vol_before = 0, invol_before = 0, vol_by_end = 0, invol_by_end = 0;
    uint64_t on_cpu = 0, in_ts = 0;
    bool on = false;
    uint64_t sampler_cpu = 0, sampler_ts = 0;
    for (const Event& e : it->second) {
      if (e.kind_enum() == Kind::kSwitchOut) {
        bool preempt = e.args[1] != 0;
        if (e.ts < t.read_begin)
          ++(preempt ? invol_before : vol_before);
        if (e.ts <= t.read_end)
          ++(preempt ? invol_by_end : vol_by_end);
        if (on && e.ts <= t.read_begin)
          on_cpu += e.ts - in_ts;
        on = false;
      } else if (e.kind_enum() == Kind::kSwitchIn) {
        on = true;
        in_ts = e.ts;
      } else if (e.kind_enum() == Kind::kThreadSample && e.ts < t.read_begin) {
        sampler_cpu = e.args[0];
        sampler_ts = e.ts;
      }
      if (e.ts > t.read_begin && on && in_ts <= t.read_begin) {
        on_cpu += t.read_begin - in_ts;  // on a CPU while it read its counters
        on = false;
      }
    }
    std::printf(
        "%-12s voluntary proc %llu perf %llu..%llu  involuntary proc %llu perf %llu..%llu  "
        "cpu proc %.1f ms perf %.1f ms\n",
        t.role.c_str(), (unsigned long long)t.voluntary, (unsigned long long)vol_before,
        (unsigned long long)vol_by_end, (unsigned long long)t.involuntary,
        (unsigned long long)invol_before, (unsigned long long)invol_by_end,
        static_cast<double>(t.cpu_at_read) / 1e6, static_cast<double>(on_cpu) / 1e6);
    // Within 2% (one switch for small counts), the read's own few microseconds allowed for.
    auto near = [](uint64_t proc, uint64_t lo, uint64_t hi) {
      double slack = std::max(1.0, 0.02 * static_cast<double>(proc));
      return static_cast<double>(lo) <= static_cast<double>(proc) + slack &&
             static_cast<double>(hi) + slack >= static_cast<double>(proc);
    };
    EXPECT_TRUE(near(t.voluntary, vol_before, vol_by_end));
    EXPECT_TRUE(near(t.involuntary, invol_before, invol_by_end));
    // Time stolen by the hypervisor while the thread was switched in counts in the records
    // only: allowed for as far as the machine's counter shows it (a tick more when it moved).
    double cpu = static_cast<double>(t.cpu_at_read);
    double stolen = r.StolenNs();
    EXPECT_NEAR(static_cast<double>(on_cpu), cpu, std::max(0.02 * cpu, 2e6) + stolen)
        << "stolen " << stolen / 1e6 << " ms";
    // The sampler's CPU time (from /proc) at its last sample before the read: no more than at
    // the read, and short of it by no more than the time between them plus the kernel's lag in
    // updating a running thread's counter (one scheduler tick, at most 10 ms at HZ=100).
    ASSERT_GT(sampler_ts, 0u);
    EXPECT_LE(sampler_cpu, t.cpu_at_read);
    EXPECT_LE(t.cpu_at_read - sampler_cpu, t.read_end - sampler_ts + 10'000'000);
  }
}

// Threads that live a few sampling periods (four spinners on two CPUs for 60 ms): each is booked
// from its creation to its exit, as the kernel's FORK and EXIT records date them, with its CPU
// time as running and the rest as queued (a spinner blocks only where the kernel makes it, which
// its schedstat shows). Before these were timed from
// their records, a new thread's first interval started at a guess (the previous pass, or its
// start time in 10 ms clock ticks) and its last one, up to the exit, was lost.
TEST(SchedE2E, ShortLivedThreadsAreBookedFromBirthToExit) {
  TempDir dir;
  Recorded r = RecordDuty(dir, {"-t", "10ms"}, {"--seconds", "0.06", "oversub"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  ASSERT_EQ(r.truth.size(), 4u) << r.run.out;
  if (!ClockIsMonotonic(r.trace))
    GTEST_SKIP() << "the session clock is not CLOCK_MONOTONIC here";
  if (r.trace.CountAll(Kind::kSwitchIn) == 0)
    GTEST_SKIP() << "perf_event_open context switches are not available here: " << r.run.err;
  ASSERT_EQ(r.trace.session.at("switch_records_lost"), "0");
  for (const Truth& t : r.truth) {
    SCOPED_TRACE("tid " + std::to_string(t.tid));
    uint64_t born = 0, gone = 0, cpu_at_exit = 0;
    std::array<uint64_t, 8> booked{};
    // The last block before the exit that no reading of the counters followed: whether the
    // thread slept all of it or was woken early and queued only its counters tell, and they are
    // gone with it (a thread that blocked while reading its /proc files waited for a CPU for
    // 3.7 ms after its wake-up and ended 0.15 ms after it ran again).
    uint64_t out_ts = 0, unread_gap = 0;
    bool blocked_out = false;
    for (const Event& e : r.trace.by_tid.at(t.tid)) {
      if (e.source == format::Source::kSampler && e.kind_enum() == Kind::kTaskExit)
        cpu_at_exit = e.args[0];
      if (e.kind_enum() == Kind::kSwitchOut) {
        out_ts = e.ts;
        blocked_out = e.args[1] == 0;
      } else if (e.kind_enum() == Kind::kSwitchIn && blocked_out) {
        unread_gap = e.ts - out_ts;
        blocked_out = false;
      } else if (e.source == format::Source::kSampler && e.kind_enum() == Kind::kThreadSample &&
                 e.args[3] != 'X') {
        unread_gap = 0;  // read since: the wake-up delay came out of the blocked time
      }
      if (e.source == format::Source::kSched && e.kind_enum() == Kind::kTaskStart)
        born = e.ts;
      if (e.source == format::Source::kSched && e.kind_enum() == Kind::kTaskExit)
        gone = e.ts;
      if (e.source == format::Source::kSampler && e.kind_enum() == Kind::kThreadStates)
        for (int i = 0; i < 8; ++i)
          booked[i] += e.args[i];
    }
    ASSERT_NE(born, 0u);
    ASSERT_GT(gone, born);
    uint64_t total = 0;
    for (uint64_t v : booked)
      total += v;
    const double life = static_cast<double>(gone - born);
    const double running = static_cast<double>(booked[kRunning]);
    const double waiting = static_cast<double>(total - booked[kRunning] - booked[kRunnable]);
    const double cpu = static_cast<double>(t.cpu_at_read);
    const double stolen = r.StolenNs();
    std::printf(
        "spinner life %.2f ms booked %.2f ms: running %.2f (its CPU time %.2f) queued "
        "%.2f waiting %.2f\n",
        life / 1e6, static_cast<double>(total) / 1e6, running / 1e6, cpu / 1e6,
        static_cast<double>(booked[kRunnable]) / 1e6, waiting / 1e6);
    EXPECT_NEAR(static_cast<double>(total), life, 0.01 * life);
    // A spinner blocks only where the kernel makes it (a page fault waiting for the address
    // space lock while its siblings are being created, the exit path): on a loaded machine that
    // reached 4 ms of a 67 ms life. The kernel's own figure is what the thread's schedstat leaves
    // of its life up to the read (neither on a CPU nor queued for one); parmon may not book more
    // waiting than that plus 2% of the life.
    double kernel_blocked = 0;
    if (t.sched_run > 0) {
      const double to_read = static_cast<double>(t.read_end) - static_cast<double>(born);
      kernel_blocked = std::max(
          0.0, to_read - static_cast<double>(t.sched_run) - static_cast<double>(t.sched_delay));
    }
    std::printf("  kernel: on a CPU %.2f ms, queued %.2f ms, blocked %.2f ms up to the read\n",
                static_cast<double>(t.sched_run) / 1e6, static_cast<double>(t.sched_delay) / 1e6,
                kernel_blocked / 1e6);
    EXPECT_LT(waiting, 0.02 * life + kernel_blocked + static_cast<double>(unread_gap))
        << "unread last block " << static_cast<double>(unread_gap) / 1e6 << " ms";
    // Running is the thread's CPU time. Time the hypervisor took its virtual CPU away while it
    // was switched in is running to the records and CPU time to nobody: the kernel's schedstat
    // leaves it out of both its time on a CPU and its time queued, so it is part of what that
    // leaves of the life (kernel_blocked); /proc/stat's steal counter, in 10 ms ticks, often
    // does not move for it. parmon takes such time back from running only when it reads the
    // counters, which a thread of a few sampling periods may not live to see.
    const double tolerance = std::max(0.02 * cpu, 1e6);
    EXPECT_GE(running, cpu - tolerance);
    EXPECT_LE(running, cpu + tolerance + std::max(stolen, kernel_blocked));
    // The CPU time the sampler gives the thread when it ends (the ThreadSample `parmon info`
    // shows): the records' running time, its counters being gone by then.
    EXPECT_GE(static_cast<double>(cpu_at_exit), cpu - tolerance);
    EXPECT_LE(static_cast<double>(cpu_at_exit), cpu + tolerance + std::max(stolen, kernel_blocked));
  }
}

TEST(SchedE2E, SwitchCountsAndCpuTimeAgreeWithProc) {
  TempDir dir;
  Recorded r = RecordDuty(dir, {"-t", "10ms"}, {"--seconds", "2", "basic"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  ASSERT_EQ(r.truth.size(), 5u);
  if (!ClockIsMonotonic(r.trace))
    GTEST_SKIP() << "the session clock is not CLOCK_MONOTONIC here";
  if (r.trace.CountAll(Kind::kSwitchIn) == 0)
    GTEST_SKIP() << "perf_event_open context switches are not available here: " << r.run.err;
  EXPECT_EQ(r.trace.session.at("switch_records_lost"), "0");
  CheckSwitchesAgainstProc(r);
  // Every switch-in on another CPU than the last switch-out is a migration, and only those.
  for (const Truth& t : r.truth) {
    int64_t last_out = -1;
    size_t expect = 0;
    for (const Event& e : r.trace.by_tid.at(t.tid)) {
      if (e.kind_enum() == Kind::kSwitchOut)
        last_out = static_cast<int64_t>(e.args[0]);
      if (e.kind_enum() == Kind::kSwitchIn && last_out >= 0 &&
          last_out != static_cast<int64_t>(e.args[0]))
        ++expect;
    }
    EXPECT_EQ(r.trace.Count(t.tid, Kind::kMigrate), expect);
  }
}

// Two threads bound to one CPU bounce a byte through two pipes 300,000 times with a few
// microseconds of work each turn: each switches out and in once a round, ~100,000 times a second
// (unbound, each wake-up waits for an IPI on this VM and the rate fell under 10,000 at load). The
// switch records miss a few microseconds of each switch (the kernel's own time between them),
// which once left such a thread 34% short of its CPU time; the sampler puts it back from the
// thread's CPU counter. Oracle: each thread's own CLOCK_THREAD_CPUTIME_ID at its end, against
// the running time the sampler booked for it over its life (what `parmon report` sums).
TEST(SchedE2E, RunningMatchesTheCpuClockOfThreadsThatSwitchOften) {
  TempDir dir;
  // Every record kept: their cost may pass the default switch budget, which would stop them.
  Recorded r = RecordDuty(dir, {"-t", "10ms", "--switch-budget", "none"},
                          {"--rounds", "300000", "--one-cpu", "pingpong"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  ASSERT_EQ(r.truth.size(), 2u) << r.run.out;
  if (r.trace.CountAll(Kind::kSwitchIn) == 0)
    GTEST_SKIP() << "perf_event_open context switches are not available here: " << r.run.err;
  for (const Truth& t : r.truth) {
    SCOPED_TRACE(t.role + " tid " + std::to_string(t.tid));
    uint64_t running = 0, switches = 0, last_cpu = 0, exit_cpu = 0;
    bool backwards = false;
    for (const Event& e : r.trace.by_tid.at(t.tid)) {
      if (e.source == format::Source::kSampler && e.kind_enum() == Kind::kThreadStates)
        running += e.args[kRunning];
      if (e.kind_enum() == Kind::kSwitchOut)
        ++switches;
      if (e.source == format::Source::kSampler && e.kind_enum() == Kind::kThreadSample) {
        backwards = backwards || e.args[0] < last_cpu;
        last_cpu = e.args[0];
      }
      if (e.source == format::Source::kSampler && e.kind_enum() == Kind::kTaskExit)
        exit_cpu = e.args[0];
    }
    const double wall_s = static_cast<double>(t.end - t.start) / 1e9;
    const double cpu = static_cast<double>(t.cpu);
    // Time the hypervisor took while the thread was switched in is running for the records and
    // not for the CPU clock; the counter's reading takes most of it out, the slack allows it.
    const double slack = 0.02 * cpu + r.StolenNs();
    std::printf(
        "%-7s switches %.0f/s  CPU clock %.1f ms  parmon running %.1f ms (%+.2f%%)  last "
        "ThreadSample %.1f ms  TaskExit %.1f ms  steal %.1f ms\n",
        t.role.c_str(), static_cast<double>(switches) / wall_s, cpu / 1e6,
        static_cast<double>(running) / 1e6, 100.0 * (static_cast<double>(running) - cpu) / cpu,
        static_cast<double>(last_cpu) / 1e6, static_cast<double>(exit_cpu) / 1e6,
        static_cast<double>(r.steal_ns) / 1e6);
    EXPECT_GT(static_cast<double>(switches) / wall_s, 10000.0) << "not the case under test";
    EXPECT_NEAR(static_cast<double>(running), cpu, slack);
    // The cumulative CPU time of its samples never goes back, and ends at its CPU clock.
    EXPECT_FALSE(backwards);
    EXPECT_NEAR(static_cast<double>(last_cpu), cpu, slack);
  }
}

// The report's overhead line counts what the kernel's context-switch records cost the program's
// threads (issue 11, item 9): two records per switch at the cost the recorder measured after the
// run. Oracle for the count: the threads' own switch counts (getrusage) and the switch-in records
// in the trace; the figures add up as the docs say.
TEST(SchedE2E, OverheadLineCountsTheSwitchRecordsTheProgramPaid) {
  TempDir dir;
  constexpr uint64_t kRounds = 20000;
  // Every record kept (the default switch budget could stop them): they are what is counted.
  Recorded r = RecordDuty(dir, {"-t", "10ms", "--switch-budget", "none"},
                          {"--rounds", std::to_string(kRounds), "--one-cpu", "pingpong"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  const uint64_t switch_ins = r.trace.CountAll(Kind::kSwitchIn);
  if (switch_ins == 0)
    GTEST_SKIP() << "perf_event_open context switches are not available here: " << r.run.err;
  ASSERT_TRUE(r.trace.session.count("switch_record_cost_ns")) << "the recorder measured no cost";
  RunResult rep = Parmon({"report", "--format", "json", dir.File("t.ptrace")});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  const nlohmann::json o = nlohmann::json::parse(rep.out)["summary"]["overhead"];
  const uint64_t switches = o["switches"];
  // In the window: a switch or two stamped before the recorder's start may fall outside it.
  EXPECT_LE(switches, switch_ins);
  EXPECT_GE(switches + 4, switch_ins);
  // The two threads' own counts of their switches (getrusage, at their ends): every one of them
  // is a switch record's pair the report counts; the program's main thread switches too.
  uint64_t own = 0;
  for (const Truth& t : r.truth)
    own += t.voluntary + t.involuntary;
  EXPECT_GE(own, kRounds) << "a round blocks at least one of the two threads";
  EXPECT_GE(switches, own);
  EXPECT_EQ(o["switch_cost_source"], "measured");
  const double cost = o["switch_record_cost_ns"];
  EXPECT_DOUBLE_EQ(cost, std::stod(r.trace.session.at("switch_record_cost_ns")));
  EXPECT_GT(cost, 10.0);
  EXPECT_LT(cost, 50'000.0);
  const uint64_t in_switches = o["in_thread_switches_ns"], in_events = o["in_thread_events_ns"];
  EXPECT_NEAR(static_cast<double>(in_switches), 2 * cost * static_cast<double>(switches), 1.0);
  EXPECT_EQ(static_cast<uint64_t>(o["in_thread_ns"]), in_switches + in_events);
  const uint64_t calibration = o["calibration_cpu_ns"], recorder = o["recorder_cpu_ns"];
  EXPECT_GT(calibration, 0u);
  EXPECT_LE(calibration, recorder);
  EXPECT_GT(static_cast<double>(o["estimated_slowdown"]), 0.0);
  const std::string text = Unwrapped(Parmon({"report", dir.File("t.ptrace")}).out);
  EXPECT_NE(text.find("context-switch records"), std::string::npos) << text;
  EXPECT_NE(text.find("cost to the program ~"), std::string::npos) << text;
}

// Periodic mode records context switches only when asked (--switches): they cost the program's
// threads two kernel records a switch and give it nothing but counts.
TEST(SchedE2E, PeriodicModeRecordsNoSwitchesUnlessAsked) {
  TempDir dir;
  Recorded r = RecordDuty(dir, {"-t", "20ms", "--mode", "periodic"}, {"--seconds", "1", "basic"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  ASSERT_EQ(r.truth.size(), 5u);
  EXPECT_EQ(r.trace.CountAll(Kind::kSwitchCounts), 0u);
  EXPECT_EQ(r.trace.CountAll(Kind::kSwitchOut), 0u);
  EXPECT_GT(r.trace.CountAll(Kind::kThreadStates), 5u * 25);
  EXPECT_EQ(r.trace.session.count("switch_records"), 0u) << "no switch source ran";
  RunResult both = Parmon({"record", "-q", "--mode", "periodic", "--switches", "--no-switches",
                           "-o", dir.File("x.ptrace"), "--", "true"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--switches and --no-switches contradict each other"), std::string::npos)
      << both.err;
}

TEST(SchedE2E, PeriodicModeKeepsOnlyAggregates) {
  TempDir dir;
  Recorded r = RecordDuty(dir, {"-t", "20ms", "--mode", "periodic", "--switches"},
                          {"--seconds", "2", "basic"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  ASSERT_EQ(r.truth.size(), 5u);
  EXPECT_EQ(r.trace.CountAll(Kind::kSwitchIn), 0u);
  EXPECT_EQ(r.trace.CountAll(Kind::kSwitchOut), 0u);
  EXPECT_GT(r.trace.CountAll(Kind::kThreadStates), 5u * 50);
  if (r.trace.CountAll(Kind::kSwitchCounts) == 0)
    GTEST_SKIP() << "perf_event_open context switches are not available here: " << r.run.err;
  for (const Truth& t : r.truth) {
    SCOPED_TRACE(t.role);
    uint64_t preempted = 0, blocked = 0;
    for (const Event& e : r.trace.by_tid.at(t.tid))
      if (e.kind_enum() == Kind::kSwitchCounts) {
        preempted += e.args[1];
        blocked += e.args[2];
      }
    // Whole-run totals: at least the counters at the read, and at most a few exit switches more
    // (a loaded machine preempted a thread 4 times between its read and its exit).
    EXPECT_GE(blocked + 1, t.voluntary);
    EXPECT_LE(blocked, t.voluntary + 3 + t.voluntary / 50);
    EXPECT_GE(preempted + 1, t.involuntary);
    EXPECT_LE(preempted, t.involuntary + 6 + t.involuntary / 50);
  }
}

TEST(SchedE2E, StaticBinaryIsSampledWithoutInstrumentation) {
  TempDir dir;
  const uint64_t steal_before = StealNs();
  RunResult run = Parmon({"record", "-q", "-o", dir.File("s.ptrace"), "--",
                          BinDir() + "/duty_cycle_static", "--seconds", "1", "spin"});
  const uint64_t steal_ns = StealNs() - steal_before;
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto truth = ParseTruth(run.out);
  ASSERT_EQ(truth.size(), 1u);
  Trace t = Load(dir.File("s.ptrace"));
  EXPECT_GT(t.Count(truth[0].tid, Kind::kThreadStates), 50u);
  auto f = StateFractions(t, truth[0].tid, truth[0].start, truth[0].end);
  const double wall = static_cast<double>(truth[0].end - truth[0].start);
  double running = static_cast<double>(truth[0].cpu) / wall;
  // One spinner: all the time the hypervisor took may have been taken from its CPU, during which
  // it is on a CPU for the scheduler (and parmon) but its own CPU clock stops.
  const double stolen =
      steal_ns == 0 ? 0 : std::min(1.0, (static_cast<double>(steal_ns) + 10e6) / wall);
  std::printf("spinner truth run %.3f | parmon run %.3f | steal %.3f of the loop\n", running,
              f[kRunning], stolen);
  EXPECT_NEAR(f[kRunning], running, 0.05 + stolen);
  EXPECT_FALSE(t.cpu_events.empty());
}

// A shell stopped with SIGSTOP for a second (by a subshell of its own, while it waits for its
// `sleep` children): that second is booked as stopped, and nothing else is.
TEST(SchedE2E, AStoppedProcessIsBookedAsStopped) {
  TempDir dir;
  const std::string script =
      "(sleep 0.5; kill -STOP $$; sleep 1; kill -CONT $$) & "
      "i=0; while [ $i -lt 25 ]; do sleep 0.1; i=$((i+1)); done; wait";
  RunResult run =
      Parmon({"record", "-q", "-o", dir.File("t.ptrace"), "--", "/bin/sh", "-c", script});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Trace t = Load(dir.File("t.ptrace"));
  double stopped_s = 0;
  for (const auto& [tid, events] : t.by_tid)
    for (const Event& e : events)
      if (e.kind_enum() == Kind::kThreadStates && e.source == format::Source::kSampler)
        stopped_s += static_cast<double>(e.args[6]) / 1e9;
  std::printf("stopped: %.3f s (the shell was stopped for 1 s)\n", stopped_s);
  // The stop is seen when the sampler next reads the process's own state letter (every 10
  // periods of 10 ms); SIGCONT ends it to the nanosecond.
  EXPECT_GT(stopped_s, 0.75);
  EXPECT_LT(stopped_s, 1.3);  // 1 s, plus starting `sleep` on a busy machine
}

TEST(SchedE2E, ThreadsThatComeAndGoBetweenSamplesAreAccountedFor) {
  TempDir dir;
  RunResult run = Parmon({"record", "-q", "-o", dir.File("c.ptrace"), "--", DutyCycle(), "churn"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  unsigned long long truth_cpu = 0;
  ASSERT_EQ(sscanf(run.out.c_str(), "churn threads=100 cpu=%llu", &truth_cpu), 1) << run.out;
  Trace t = Load(dir.File("c.ptrace"));
  // The main thread's last ProcessSample: CPU of threads the sampler saw end, plus what it
  // never saw (threads born and gone between two samples, and the ends of the others).
  uint32_t main_tid = 0;
  uint64_t exited_unseen = 0;
  for (const auto& [tid, events] : t.by_tid)
    for (const Event& e : events)
      if (e.kind_enum() == Kind::kProcessSample) {
        main_tid = tid;
        exited_unseen = e.args[2];
      }
  ASSERT_NE(main_tid, 0u);
  uint64_t exited_seen = 0, sampled_threads = 0;
  for (const auto& [tid, events] : t.by_tid) {
    if (tid == main_tid)
      continue;
    for (const Event& e : events)
      if (e.kind_enum() == Kind::kTaskExit && e.source == format::Source::kSampler) {
        exited_seen += e.args[0];
        ++sampled_threads;
      }
  }
  double accounted = static_cast<double>(exited_seen + exited_unseen);
  double truth = static_cast<double>(truth_cpu);
  std::printf("churn: truth %.1f ms, sampler saw %llu threads end with %.1f ms, %.1f ms unseen\n",
              truth / 1e6, (unsigned long long)sampled_threads,
              static_cast<double>(exited_seen) / 1e6, static_cast<double>(exited_unseen) / 1e6);
  // /proc's process counters come in 10 ms clock ticks.
  EXPECT_NEAR(accounted, truth, 20e6 + 0.05 * truth);
  if (t.CountAll(Kind::kSwitchIn) == 0)
    GTEST_SKIP() << "no context switches here: " << run.err;
  // The kernel's fork and exit records name every one of them.
  size_t started = 0, ended = 0;
  for (const auto& [tid, events] : t.by_tid) {
    if (tid == main_tid)
      continue;
    for (const Event& e : events) {
      if (e.source != format::Source::kSched)
        continue;
      started += e.kind_enum() == Kind::kTaskStart;
      ended += e.kind_enum() == Kind::kTaskExit;
    }
  }
  EXPECT_EQ(started, 100u);
  EXPECT_EQ(ended, 100u);
}

// Starts the program outside parmon; its stdout goes to a file.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& out_file) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> a;
  for (const auto& s : argv)
    a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  pid_t pid = -1;
  posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

std::vector<uint32_t> Tasks(pid_t pid) {
  std::vector<uint32_t> v;
  for (int i = 0; i < 100 && v.size() < 2; ++i) {
    v.clear();
    std::string dir = "/proc/" + std::to_string(pid) + "/task";
    RunResult r = parmon::testing::Run({"ls", dir});
    std::istringstream in(r.out);
    uint32_t tid;
    while (in >> tid)
      v.push_back(tid);
    if (v.size() < 2)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return v;
}

TEST(SchedE2E, AttachFollowsAProcessItDidNotStart) {
  TempDir dir;
  pid_t pid = Spawn({DutyCycle(), "--seconds", "2", "spin"}, dir.File("out"));
  ASSERT_GT(pid, 0);
  auto start = std::chrono::steady_clock::now();
  RunResult run = Parmon({"record", "-q", "-o", dir.File("a.ptrace"), "-p", std::to_string(pid)});
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_GT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
  auto truth = ParseTruth(ReadFile(dir.File("out")));
  ASSERT_EQ(truth.size(), 1u);
  Trace t = Load(dir.File("a.ptrace"));
  EXPECT_EQ(t.session.at("attached_pid"), std::to_string(pid));
  EXPECT_GT(t.Count(truth[0].tid, Kind::kThreadStates), 50u);
  EXPECT_TRUE(t.sampled_tids.count(static_cast<uint32_t>(pid)));
  if (t.CountAll(Kind::kSwitchIn) == 0)
    GTEST_SKIP() << "no context switches here: " << run.err;
  EXPECT_GT(t.Count(truth[0].tid, Kind::kSwitchIn), 0u);
}

TEST(SchedE2E, AttachWithDurationAndThreadsRecordsOnlyThoseThreads) {
  TempDir dir;
  pid_t pid = Spawn({DutyCycle(), "--seconds", "4", "basic"}, dir.File("out"));
  ASSERT_GT(pid, 0);
  std::vector<uint32_t> tasks = Tasks(pid);
  ASSERT_GE(tasks.size(), 2u);
  uint32_t chosen = tasks.back();
  auto start = std::chrono::steady_clock::now();
  RunResult run = Parmon({"record", "-q", "-o", dir.File("a.ptrace"), "-p", std::to_string(pid),
                          "--duration", "1s", "--threads", std::to_string(chosen)});
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_LT(took, std::chrono::milliseconds(3000));
  EXPECT_EQ(kill(pid, 0), 0) << "attaching must not end the process";
  int status = 0;
  waitpid(pid, &status, 0);
  Trace t = Load(dir.File("a.ptrace"));
  EXPECT_EQ(t.sampled_tids, std::set<uint32_t>{chosen});
  for (uint32_t tid : t.switch_tids)
    EXPECT_EQ(tid, chosen);
  EXPECT_GT(t.Count(chosen, Kind::kThreadStates), 30u);
}

// Attached to a process whose spinner has run for a second already: info says what was followed
// (its command line, read from /proc, and one process; it showed an empty command and
// "processes 0") and gives the spinner the CPU time of the recorded window, which is what the
// report's states add up to, not its whole life (4.37 s in a 3 s window).
TEST(SchedE2E, AttachedSessionNamesTheProcessAndCountsTheWindowsCpu) {
  TempDir dir;
  pid_t pid = Spawn({DutyCycle(), "--seconds", "4", "spin"}, dir.File("out"));
  ASSERT_GT(pid, 0);
  ASSERT_GE(Tasks(pid).size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  RunResult run = Parmon(
      {"record", "-q", "-o", dir.File("a.ptrace"), "-p", std::to_string(pid), "--duration", "1s"});
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto truth = ParseTruth(ReadFile(dir.File("out")));
  ASSERT_EQ(truth.size(), 1u);
  RunResult info = Parmon({"info", dir.File("a.ptrace")});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("command     " + DutyCycle() + " --seconds 4 spin\n"), std::string::npos)
      << info.out;
  EXPECT_NE(info.out.find("processes   1\n"), std::string::npos) << info.out;
  // The spinner's row of the thread-state table: CPU(s) is its third field from the end.
  double info_cpu = -1;
  std::istringstream lines(info.out);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> f;
    std::istringstream words(line);
    for (std::string w; words >> w;)
      f.push_back(w);
    if (f.size() > 5 && f[1] == std::to_string(truth[0].tid) && line.find('/') != std::string::npos)
      info_cpu = std::stod(f[f.size() - 3]) * 1e9;
  }
  ASSERT_GE(info_cpu, 0) << info.out;
  Trace t = Load(dir.File("a.ptrace"));
  uint64_t running = 0;
  for (const Event& e : t.by_tid.at(truth[0].tid))
    if (e.source == format::Source::kSampler && e.kind_enum() == Kind::kThreadStates)
      running += e.args[kRunning];
  ASSERT_GT(running, 0u);
  // Its last reading may come up to 8 sampling periods (80 ms) before the end of the window.
  EXPECT_NEAR(info_cpu, static_cast<double>(running), 0.05 * static_cast<double>(running) + 100e6)
      << "whole life at the end: " << static_cast<double>(truth[0].cpu_at_read) / 1e9 << " s";
}

TEST(SchedE2E, RefusedPerfEventOpenIsSaidOnceAndSamplingGoesOn) {
  TempDir dir;
  RunResult run =
      parmon::testing::Run({BinDir() + "/seccomp_no_perf", ParmonBin(), "record", "-q", "-o",
                            dir.File("n.ptrace"), "--", DutyCycle(), "--seconds", "1", "spin"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  size_t lines = 0, pos = 0;
  while ((pos = run.err.find('\n', pos)) != std::string::npos)
    ++lines, ++pos;
  EXPECT_EQ(lines, 1u) << run.err;
  EXPECT_NE(run.err.find("context switches"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("perf_event_open"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("Permission denied"), std::string::npos) << run.err;
  Trace t = Load(dir.File("n.ptrace"));
  auto truth = ParseTruth(run.out);
  ASSERT_EQ(truth.size(), 1u);
  EXPECT_GT(t.Count(truth[0].tid, Kind::kThreadStates), 50u);
  EXPECT_EQ(t.CountAll(Kind::kSwitchIn), 0u);
}

TEST(SchedE2E, RunsAsAnOrdinaryUser) {
  TempDir dir;
  std::vector<std::string> prefix;
  if (getuid() == 0) {
    if (parmon::testing::Run({"sh", "-c", "command -v setpriv"}).exit_code != 0)
      GTEST_SKIP() << "running as root and setpriv (util-linux) is missing: cannot drop to nobody";
    chmod(dir.path().c_str(), 0777);
    prefix = {"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"};
  }
  std::vector<std::string> argv = prefix;
  for (const std::string& a :
       {ParmonBin(), std::string("record"), std::string("-q"), std::string("-o"),
        dir.File("u.ptrace"), std::string("--"), DutyCycle(), std::string("--seconds"),
        std::string("2"), std::string("basic")})
    argv.push_back(a);
  const uint64_t steal = StealNs();
  RunResult run = parmon::testing::Run(argv);
  const uint64_t stolen = StealNs() - steal;
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto truth = ParseTruth(run.out);
  ASSERT_EQ(truth.size(), 5u);
  Trace t = Load(dir.File("u.ptrace"));
  for (const Truth& th : truth)
    EXPECT_GT(t.Count(th.tid, Kind::kThreadStates), 50u) << th.role;
  // perf_event_paranoid <= 2 lets a user see context switches of their own processes.
  std::string paranoid = ReadFile("/proc/sys/kernel/perf_event_paranoid");
  if (!paranoid.empty() && std::stoi(paranoid) <= 2) {
    EXPECT_TRUE(run.err.empty()) << run.err;
    if (ClockIsMonotonic(t))
      CheckSwitchesAgainstProc(Recorded{run, t, truth, stolen});
  }
}

// The switch-record budget (trace mode, --switch-budget, sched/switch_budget.h): four threads
// calling sched_yield on a 2-CPU machine switch ~600,000 times a second, whose records would cost
// ~14% of their CPU time or more. Under other work (a build beside the suite) their rate can fall
// to a third of that, near the default budget of 5%, so the test sets 1%. The recorder stops the
// records within a window or two; the stop is in the trace with its
// reasons, no thread has a switch record after it (neither the threads whose events the kernel
// inherited before the stop, nor those of a child process forked after it), and each thread's
// running time, now booked from /proc after the stop, still matches its own CPU clock.
TEST(SchedE2E, SwitchBudgetStopsTheRecordsOfAProgramThatSwitchesVeryOften) {
  TempDir dir;
  Recorded r = RecordDuty(dir, {"-t", "10ms", "--switch-budget", "1"}, {"--seconds", "4", "yield"});
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  ASSERT_EQ(r.truth.size(), 6u) << r.run.out;
  if (r.trace.CountAll(Kind::kSwitchIn) == 0)
    GTEST_SKIP() << "perf_event_open context switches are not available here: " << r.run.err;
  auto reader = format::TraceReader::Open(dir.File("t.ptrace"));
  ASSERT_TRUE(reader.ok());
  const auto& stops = (*reader)->definitions().switch_stops;
  // The premise: the program switched often enough for its records to cost more than the budget.
  // Beside CPU hogs, sched_yield hands the CPU to them for whole time slices and the program
  // switches a hundred times less; then its records are cheap and there is nothing to stop.
  // Oracle: the threads' own switch counts and CPU clocks (getrusage, at their ends), with the
  // build's 450 ns a record, two records a switch.
  uint64_t own_switches = 0, own_cpu = 0;
  for (const Truth& t : r.truth) {
    own_switches += t.voluntary + t.involuntary;
    own_cpu += t.cpu;
  }
  const double own_share = 2.0 * 450.0 * static_cast<double>(own_switches) /
                           static_cast<double>(std::max<uint64_t>(own_cpu, 1));
  if (stops.empty() && own_share < 0.02)
    GTEST_SKIP() << "the machine's load kept the program from switching often: " << own_switches
                 << " switches in " << own_cpu / 1'000'000 << " ms of CPU, ~" << own_share * 100
                 << "% of it in records, too near the 1% budget";
  ASSERT_EQ(stops.size(), 1u) << "the records were not stopped; the program's own share "
                              << own_share;
  const format::Definitions::SwitchStop& stop = stops[0];
  EXPECT_GT(stop.window_records, 0u);
  EXPECT_GT(stop.share(), 0.01) << "over the budget";
  EXPECT_EQ(stop.budget_ppm, 10'000u);
  EXPECT_EQ(stop.records, std::stoull(r.trace.session.at("switch_records")))
      << "every record read was kept, none after the stop";
  EXPECT_EQ(r.trace.session.at("switch_records_stopped_ns"), std::to_string(stop.ts));
  // Not one switch record after the stop, on any thread of either process.
  uint64_t before = 0, after = 0;
  for (const auto& [tid, events] : r.trace.by_tid)
    for (const Event& e : events)
      if (e.kind_enum() == Kind::kSwitchIn || e.kind_enum() == Kind::kSwitchOut ||
          e.kind_enum() == Kind::kMigrate)
        ++(e.ts <= stop.ts ? before : after);
  EXPECT_GT(before, 1000u);
  EXPECT_EQ(after, 0u);
  for (const Truth& t : r.truth) {
    SCOPED_TRACE(t.role + " tid " + std::to_string(t.tid));
    const std::vector<Event>& events = r.trace.by_tid.at(t.tid);
    uint64_t running = 0, first = UINT64_MAX, switches = 0;
    for (const Event& e : events) {
      if (e.source == format::Source::kSampler && e.kind_enum() == Kind::kThreadStates) {
        running += e.args[kRunning];
        uint64_t len = 0;
        for (int i = 0; i < 8; ++i)
          len += e.args[i];
        first = std::min(first, e.ts - len);
      }
      switches += e.kind_enum() == Kind::kSwitchIn;
    }
    if (t.role == "late_yielder") {
      // Made half way through, after the stop: the kernel gave its threads events that are off.
      EXPECT_GT(first, stop.ts) << "the child came before the stop; nothing is shown about it";
      EXPECT_EQ(switches, 0u);
    } else {
      EXPECT_GT(switches, 100u) << "recorded until the stop";
    }
    // The oracle: the thread's own CPU clock at its end, against the running parmon booked over
    // its life (records before the stop, /proc samples after it).
    const double cpu = static_cast<double>(t.cpu);
    EXPECT_NEAR(static_cast<double>(running), cpu, 0.02 * cpu + r.StolenNs());
  }
  // The report says it in one sentence, the same in text, JSON and HTML.
  RunResult json = Parmon({"report", "--format", "json", dir.File("t.ptrace")});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json js = nlohmann::json::parse(json.out)["summary"]["switch_stops"];
  ASSERT_EQ(js.size(), 1u);
  EXPECT_EQ(js[0]["records"], stop.records);
  EXPECT_DOUBLE_EQ(static_cast<double>(js[0]["budget"]), 0.01);
  EXPECT_NEAR(static_cast<double>(js[0]["share"]), stop.share(), 1e-9);
  const std::string sentence = js[0]["text"];
  EXPECT_NE(sentence.find("context-switch records stopped at "), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("of the program's CPU time (budget 1%"), std::string::npos) << sentence;
  EXPECT_NE(sentence.find("thread states after that come from /proc samples"), std::string::npos)
      << sentence;
  EXPECT_NE(Unwrapped(Parmon({"report", dir.File("t.ptrace")}).out).find(sentence),
            std::string::npos);
  RunResult html = Parmon({"report", "--format", "html", dir.File("t.ptrace")});
  EXPECT_NE(html.out.find("context-switch records stopped at"), std::string::npos);
}

// A program that switches a few hundred times a second keeps every record; so does one that
// switches very often when the budget is switched off.
TEST(SchedE2E, SwitchBudgetKeepsTheRecordsOfFewSwitchesOrWithoutABudget) {
  TempDir dir;
  Recorded few = RecordDuty(dir, {"-t", "10ms"}, {"--seconds", "1.5", "basic"});
  ASSERT_EQ(few.run.exit_code, 0) << few.run.err;
  if (few.trace.CountAll(Kind::kSwitchIn) == 0)
    GTEST_SKIP() << "perf_event_open context switches are not available here: " << few.run.err;
  auto has_stop = [&](const std::string& path) {
    auto reader = format::TraceReader::Open(path);
    EXPECT_TRUE(reader.ok());
    return reader.ok() && !(*reader)->definitions().switch_stops.empty();
  };
  EXPECT_FALSE(has_stop(dir.File("t.ptrace")));
  EXPECT_EQ(few.trace.session.count("switch_records_stopped_ns"), 0u);
  EXPECT_EQ(Unwrapped(Parmon({"report", dir.File("t.ptrace")}).out).find("records stopped"),
            std::string::npos);

  Recorded all =
      RecordDuty(dir, {"-t", "10ms", "--switch-budget", "none"}, {"--seconds", "2", "yield"});
  ASSERT_EQ(all.run.exit_code, 0) << all.run.err;
  EXPECT_FALSE(has_stop(dir.File("t.ptrace")));
  EXPECT_EQ(all.trace.session.at("switch_budget_ppm"), "0");
  for (const Truth& t : all.truth) {
    SCOPED_TRACE(t.role + " tid " + std::to_string(t.tid));
    // The late child's threads too: the records go on to the end.
    EXPECT_GT(all.trace.Count(t.tid, Kind::kSwitchIn), 100u);
  }
}

TEST(SchedE2E, BadOptionsGetOneClearLine) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  } cases[] = {
      {{"record", "-t", "500us", "--", "true"}, "1ms to 60s"},
      {{"record", "-t", "soon", "--", "true"}, "not a period"},
      {{"record", "--threads", "12,x", "--", "true"}, "'x' is not a thread id"},
      {{"record", "--duration", "1s", "--", "true"}, "needs -p"},
      {{"record", "-p", "999999999"}, "no process 999999999"},
      {{"record", "-p", "1", "--", "true"}, "either -p PID or a command"},
      {{"record", "--switch-budget", "-5", "--", "true"}, "'-5' is not a share"},
      {{"record", "--switch-budget", "101", "--", "true"}, "from 0 to 100 percent"},
      {{"record", "--switch-budget", "lots", "--", "true"}, "'lots' is not a share"},
      {{"record", "--switch-budget", "5x", "--", "true"}, "'5x' is not a share"},
      {{"record", "--switch-budget", "nan", "--", "true"}, "'nan' is not a share"},
      {{"record", "--switch-budget", "0.001", "--", "true"}, "below what"},
      {{"record", "--switch-budget", "5", "--no-switches", "--", "true"}, "not to --no-switches"},
      {{"record", "--switch-budget", "5", "--mode", "periodic", "--", "true"},
       "not to --mode periodic"},
  };
  for (const auto& c : cases) {
    RunResult r = Parmon(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args[1];
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace parmon::testing
