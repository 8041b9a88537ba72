// Unit tests of the /proc parsers and the thread-state accounting, on captured text.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "format/event.h"
#include "sched/classify.h"
#include "sched/proc.h"
#include "sched/sampler.h"
#include "sched/sched.h"
#include "sched/switches.h"

namespace parmon::sched {
namespace {

TEST(ProcParse, TaskStatWithAwkwardCommandName) {
  // A command name may hold spaces and parentheses; fields resume after the last ')'.
  std::string text =
      "4242 (a) b (c) S 4000 4242 3841 0 -1 4194304 132 0 0 0 15 7 0 0 20 0 3 0 68623 2990080 "
      "408 18446744073709551615 1 2 3 0 0 0 0 6 0 1 0 0 17 1 0 0 0 0 0 4 5 6 7 8 9 10 0\n";
  TaskStat s;
  ASSERT_TRUE(ParseTaskStat(text, &s));
  EXPECT_EQ(s.state, 'S');
  EXPECT_EQ(s.ppid, 4000u);
  EXPECT_EQ(s.utime_ticks, 15u);
  EXPECT_EQ(s.stime_ticks, 7u);
  EXPECT_EQ(s.num_threads, 3u);
  EXPECT_EQ(s.start_ticks, 68623u);
  EXPECT_EQ(s.processor, 1);
  EXPECT_FALSE(ParseTaskStat("4242 (x) S 1 2", &s));
  EXPECT_FALSE(ParseTaskStat("", &s));
}

TEST(ProcParse, SchedStatSyscallStatus) {
  SchedStat ss;
  ASSERT_TRUE(ParseSchedStat("244249865 274759458 67\n", &ss));
  EXPECT_EQ(ss.cpu_ns, 244249865u);
  EXPECT_EQ(ss.run_delay_ns, 274759458u);
  EXPECT_EQ(ss.run_count, 67u);
  EXPECT_FALSE(ParseSchedStat("12 x 3", &ss));

  uint64_t nr = 0;
  ASSERT_TRUE(ParseSyscall("230 0x0 0x0 0x7ffe 0x7ffe 0x0 0x0 0x7ffe 0x7efe\n", &nr));
  EXPECT_EQ(nr, 230u);
  ASSERT_TRUE(ParseSyscall("running\n", &nr));
  EXPECT_EQ(nr, kNoSyscall);
  ASSERT_TRUE(ParseSyscall("-1 0x7ffe 0x7efe\n", &nr));
  EXPECT_EQ(nr, kNoSyscall);
  EXPECT_FALSE(ParseSyscall("", &nr));

  SwitchCounters sc;
  ASSERT_TRUE(
      ParseStatusSwitches("Name:\tx\nState:\tS\nvoluntary_ctxt_switches:\t12\n"
                          "nonvoluntary_ctxt_switches:\t3\n",
                          &sc));
  EXPECT_EQ(sc.voluntary, 12u);
  EXPECT_EQ(sc.involuntary, 3u);
  EXPECT_FALSE(ParseStatusSwitches("Name:\tx\n", &sc));
}

TEST(ProcParse, ProcStatCpus) {
  std::vector<CpuTimes> cpus;
  ASSERT_TRUE(
      ParseProcStat("cpu  10 0 5 100 1 0 0 0 0 0\n"
                    "cpu0 4 1 2 50 1 1 1 2 0 0\n"
                    "cpu1 6 0 3 50 0 0 0 0 0 0\nintr 1 2 3\n",
                    &cpus));
  ASSERT_EQ(cpus.size(), 2u);
  EXPECT_EQ(cpus[0].cpu, 0u);
  EXPECT_EQ(cpus[0].busy, 4u + 1 + 2 + 1 + 1);
  EXPECT_EQ(cpus[0].idle, 50u);
  EXPECT_EQ(cpus[0].iowait, 1u);
  EXPECT_EQ(cpus[0].steal, 2u);
  EXPECT_EQ(cpus[1].busy, 9u);
  EXPECT_FALSE(ParseProcStat("intr 1\n", &cpus));
}

TEST(Classify, WaitStates) {
  EXPECT_EQ(WaitState('S', SYS_futex), ThreadState::kLockWait);
  EXPECT_EQ(WaitState('S', SYS_read), ThreadState::kCommWait);
  EXPECT_EQ(WaitState('S', SYS_epoll_wait), ThreadState::kCommWait);
  EXPECT_EQ(WaitState('S', SYS_clock_nanosleep), ThreadState::kTimerWait);
  EXPECT_EQ(WaitState('S', SYS_wait4), ThreadState::kOtherWait);
  EXPECT_EQ(WaitState('D', SYS_read), ThreadState::kIoWait);
  EXPECT_EQ(WaitState('T', SYS_read), ThreadState::kStopped);
  EXPECT_EQ(WaitState('S', kNoSyscall), ThreadState::kOtherWait);
}

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kUs = 1'000;

std::string SchedStatPath(pid_t tid) {
  return "/proc/" + std::to_string(getpid()) + "/task/" + std::to_string(tid) + "/schedstat";
}

uint64_t Sum(const StateSplit& s) {
  uint64_t t = 0;
  for (uint64_t v : s)
    t += v;
  return t;
}

TEST(Classify, SplitsAddUpAndRunningEqualsCpuTime) {
  ThreadAccount a;
  a.Begin(0, SchedStat{});
  auto never = [] { return false; };
  // 10 ms: 4 ms on CPU, 1 ms queued, asleep in nanosleep now.
  Reading r{10 * kMs, {4 * kMs, 1 * kMs, 2}, 'S', SYS_nanosleep};
  StateSplit s = a.Update(r, never);
  EXPECT_EQ(Sum(s), 10 * kMs);
  EXPECT_EQ(s[0], 4 * kMs);
  EXPECT_EQ(s[1], 1 * kMs);
  EXPECT_EQ(s[static_cast<int>(ThreadState::kTimerWait)], 5 * kMs);
  // Then blocked on a futex for 10 ms without running.
  s = a.Update({20 * kMs, {4 * kMs, 1 * kMs, 2}, 'S', SYS_futex}, never);
  EXPECT_EQ(s[static_cast<int>(ThreadState::kLockWait)], 10 * kMs);
}

TEST(Classify, AssumedIntervalsAreRepaidByTheNextReading) {
  // Read at 10 ms (running), then two intervals booked from the switch records without a read
  // (running throughout), then read at 40 ms: running sums to the CPU time, nothing twice.
  ThreadAccount a;
  a.Begin(0, SchedStat{});
  auto never = [] { return false; };
  StateSplit s = a.Update({10 * kMs, {10 * kMs, 0, 1}, 'R', kNoSyscall}, never);
  uint64_t running = s[0];
  s = a.Assume(20 * kMs, ThreadState::kRunning);
  EXPECT_EQ(s[0], 10 * kMs);
  running += s[0];
  running += a.Assume(30 * kMs, ThreadState::kRunning)[0];
  s = a.Update({40 * kMs, {40 * kMs, 0, 1}, 'R', kNoSyscall}, never);
  EXPECT_EQ(Sum(s), 10 * kMs);
  running += s[0];
  EXPECT_EQ(running, 40 * kMs);
  // Then preempted and queued for two booked intervals; the delay arrives when it runs again.
  uint64_t runnable = a.Assume(50 * kMs, ThreadState::kRunnable)[1];
  runnable += a.Assume(60 * kMs, ThreadState::kRunnable)[1];
  s = a.Update({70 * kMs, {45 * kMs, 25 * kMs, 2}, 'R', kNoSyscall}, never);
  EXPECT_EQ(Sum(s), 10 * kMs);
  runnable += s[1];
  EXPECT_EQ(runnable, 25 * kMs);
  EXPECT_EQ(s[0], 5 * kMs);
  // Blocked on a futex for a booked interval: a wait, and the counters did not move.
  s = a.Assume(80 * kMs, ThreadState::kLockWait);
  EXPECT_EQ(s[static_cast<int>(ThreadState::kLockWait)], 10 * kMs);
  s = a.Update({90 * kMs, {45 * kMs, 25 * kMs, 2}, 'S', SYS_futex}, never);
  EXPECT_EQ(s[static_cast<int>(ThreadState::kLockWait)], 10 * kMs);
}

TEST(Classify, LaggingCpuCounterOfARunningThreadIsRunning) {
  // A spinner never switched: the counter lags by part of a tick, yet the thread ran throughout.
  ThreadAccount a;
  a.Begin(0, SchedStat{0, 0, 1});
  auto never = [] { return false; };
  StateSplit s = a.Update({10 * kMs, {7 * kMs, 0, 1}, 'R', kNoSyscall}, never);
  EXPECT_EQ(s[0], 10 * kMs);
  s = a.Update({20 * kMs, {20 * kMs, 0, 1}, 'R', kNoSyscall}, never);
  EXPECT_EQ(s[0], 10 * kMs);
  s = a.Update({30 * kMs, {29 * kMs, 0, 1}, 'R', kNoSyscall}, never);
  EXPECT_EQ(s[0], 10 * kMs);
}

TEST(Classify, QueuedTimeIsRunnableAndNotCountedTwice) {
  ThreadAccount a;
  a.Begin(0, SchedStat{});
  int asked = 0;
  auto never = [&] {
    ++asked;
    return false;
  };
  // Ran 5 ms, queued for the rest (the kernel adds that delay only when it runs again).
  StateSplit s = a.Update({10 * kMs, {5 * kMs, 0, 3}, 'R', kNoSyscall}, never);
  EXPECT_EQ(s[1], 5 * kMs);
  EXPECT_EQ(asked, 1);
  // It ran again after 7 ms in the queue in all (5 of them booked already), then ran 8 ms.
  s = a.Update({20 * kMs, {13 * kMs, 7 * kMs, 4}, 'R', kNoSyscall}, never);
  EXPECT_EQ(s[0], 8 * kMs);
  EXPECT_EQ(s[1], 2 * kMs);
  EXPECT_EQ(Sum(s), 10 * kMs);
}

TEST(Classify, RunnableNowButBlockedMeanwhileIsAWait) {
  ThreadAccount a;
  a.Begin(0, SchedStat{});
  auto never = [] { return false; };
  auto yes = [] { return true; };
  a.Update({10 * kMs, {2 * kMs, 0, 2}, 'S', SYS_nanosleep}, never);
  // Woke, ran 5 ms, slept 5 ms, and is running again when read.
  StateSplit s = a.Update({20 * kMs, {7 * kMs, 0, 4}, 'R', kNoSyscall}, yes);
  EXPECT_EQ(s[0], 5 * kMs);
  EXPECT_EQ(s[static_cast<int>(ThreadState::kTimerWait)], 5 * kMs);
}

TEST(Classify, BookedFromRecordsThenRereadFindsOnlyTheWakeUpDelay) {
  // Timed from the switch records: ran 4 ms, preempted and queued 2 ms, ran 1 ms, slept 3 ms.
  ThreadAccount a;
  a.Begin(0, SchedStat{10 * kMs, 1 * kMs, 5});
  StateSplit s{};
  s[0] = 5 * kMs;
  s[1] = 2 * kMs;
  s[static_cast<int>(ThreadState::kTimerWait)] = 3 * kMs;
  a.Book(10 * kMs, s, 0);
  EXPECT_EQ(a.last_ns(), 10 * kMs);
  EXPECT_EQ(a.last_wait(), ThreadState::kTimerWait);
  // The counters then: 5 ms more CPU, 2.5 ms more delay: the 2 ms of the preemption and 0.5 ms
  // between the timer's wake-up and the next switch-in, which the records booked as sleep.
  EXPECT_EQ(a.Reread({15 * kMs, 3500 * kUs, 7}), 500 * kUs);
  // Booked again (the 0.5 ms as runnable, counted already), then read with nothing new: the
  // delay is not found twice.
  StateSplit t{};
  t[1] = 500 * kUs;
  t[static_cast<int>(ThreadState::kTimerWait)] = 9500 * kUs;
  a.Book(20 * kMs, t, 500 * kUs);
  EXPECT_EQ(a.Reread({15 * kMs, 3500 * kUs, 7}), 0u);
  // A CPU counter behind the records (its lag on a CPU) is no delay and no carry: the next
  // reading repays it and an old-style Update after it books only what is new.
  StateSplit r{};
  r[0] = 10 * kMs;
  a.Book(30 * kMs, r, 0);
  EXPECT_EQ(a.Reread({22 * kMs, 3500 * kUs, 7}), 0u);
  auto never = [] { return false; };
  StateSplit u = a.Update({40 * kMs, {35 * kMs, 3500 * kUs, 8}, 'S', SYS_nanosleep}, never);
  EXPECT_EQ(u[0], 10 * kMs);  // 13 ms counted, 3 of them booked at 30 ms
  EXPECT_EQ(Sum(u), 10 * kMs);
}

// Running and waiting in a pipe read (comm-wait): a split booked from the switch records.
StateSplit RunAndWait(uint64_t run, uint64_t wait) {
  StateSplit s{};
  s[0] = run;
  s[static_cast<int>(ThreadState::kCommWait)] = wait;
  return s;
}

// Issue 12: a thread that switches often runs a few microseconds more per switch than its switch
// records show. The counter's reading finds it, owes it as running, and booking it pays it off;
// the CPU time it was owed is never counted twice.
TEST(Classify, CpuTimeTheRecordsMissedIsOwedAsRunning) {
  ThreadAccount a;
  a.Begin(0, SchedStat{0, 0, 0});
  a.Book(10 * kMs, RunAndWait(3 * kMs, 7 * kMs), 0);
  // The counter says 4.5 ms: 1.5 ms more than the records booked.
  EXPECT_EQ(a.Reread({4500 * kUs, 0, 900}, 2 * kMs), 0u);
  EXPECT_EQ(a.cpu_owed(), 1500 * kUs);
  // The next interval books the records' 3 ms and the 1.5 ms owed.
  a.Book(20 * kMs, RunAndWait(4500 * kUs, 5500 * kUs), 0);
  EXPECT_EQ(a.cpu_owed(), 0u);
  // The counter: 3 ms more (4.5 + 3 = 7.5 ms): all of it was booked ahead, nothing owed.
  EXPECT_EQ(a.Reread({7500 * kUs, 0, 1800}, 2 * kMs), 0u);
  EXPECT_EQ(a.cpu_owed(), 0u);
  // Beyond what the caller allows (switch-in records not collected yet, which will book that
  // running themselves): not owed.
  a.Book(30 * kMs, RunAndWait(0, 10 * kMs), 0);
  EXPECT_EQ(a.Reread({11500 * kUs, 0, 1900}, 1 * kMs), 0u);
  EXPECT_EQ(a.cpu_owed(), 1 * kMs);
  a.Book(40 * kMs, RunAndWait(1 * kMs, 9 * kMs), 0);
  EXPECT_EQ(a.cpu_owed(), 0u);
  // An estimate for a thread that ended is owed on top of the records' running.
  a.Owe(200 * kUs);
  EXPECT_EQ(a.cpu_owed(), 200 * kUs);
}

TEST(ThreadList, Parses) {
  std::set<uint32_t> tids;
  std::string error;
  ASSERT_TRUE(ParseThreadList("12,40,7", &tids, &error));
  EXPECT_EQ(tids, (std::set<uint32_t>{7, 12, 40}));
  EXPECT_FALSE(ParseThreadList("12,,4", &tids, &error));
  EXPECT_NE(error.find("''"), std::string::npos);
  EXPECT_FALSE(ParseThreadList("abc", &tids, &error));
  EXPECT_FALSE(ParseThreadList("", &tids, &error));
  EXPECT_FALSE(ParseThreadList("0", &tids, &error));
}

// The sampler fed by the context-switch recorder, in this process: a thread blocked on a pipe
// for the whole run and a spinning thread are mostly booked without reading /proc, and still get
// their whole wait and their whole CPU time.
TEST(SchedSamplerWithSwitches, UnswitchedThreadsAreBookedWithoutReadingAndStayRight) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::atomic<bool> stop{false};
  std::atomic<pid_t> blocked_tid{0}, spinner_tid{0};
  std::thread blocked([&] {
    blocked_tid = static_cast<pid_t>(syscall(SYS_gettid));
    char c;
    (void)!read(fds[0], &c, 1);
  });
  std::thread spinner([&] {
    spinner_tid = static_cast<pid_t>(syscall(SYS_gettid));
    volatile uint64_t x = 0;
    while (!stop.load(std::memory_order_relaxed))
      x = x + 1;
  });
  while (blocked_tid.load() == 0 || spinner_tid.load() == 0)
    std::this_thread::yield();
  auto finish = [&] {
    stop = true;
    (void)!write(fds[1], "x", 1);
    blocked.join();
    spinner.join();
    close(fds[0]);
    close(fds[1]);
  };
  timespec settle{0, 20'000'000};  // the reader reaches read()
  nanosleep(&settle, nullptr);

  SwitchRecorder rec(SwitchOptions{});
  std::vector<pid_t> tasks;
  for (uint32_t tid : ListTasks(static_cast<uint32_t>(getpid())))
    tasks.push_back(static_cast<pid_t>(tid));
  Status opened = rec.Open(tasks, false, false, true);
  if (!opened.ok()) {
    finish();
    GTEST_SKIP() << opened.message();
  }
  SamplerOptions options;
  options.activity = rec.activity();
  options.attached = true;  // its threads were running before the records began
  SamplerCore core(options, MonotonicNs());
  core.AddProcess(static_cast<uint32_t>(getpid()));
  std::map<uint32_t, StateSplit> sums;
  std::map<uint32_t, uint64_t> first_ts, last_ts;
  std::vector<SamplerCore::Output> out;
  constexpr int kPasses = 150;
  uint64_t spinner_cpu_begin = 0;
  for (int pass = 0; pass < kPasses; ++pass) {
    out.clear();
    core.Sample(MonotonicNs(), &out);
    rec.Drain(nullptr, ~uint64_t{0});
    for (const auto& o : out) {
      if (o.event.kind_enum() == format::Kind::kThreadSample && pass == 0 &&
          o.tid == static_cast<uint32_t>(spinner_tid.load()))
        spinner_cpu_begin = o.event.args[0];
      if (o.event.kind_enum() != format::Kind::kThreadStates || pass == 0)
        continue;
      for (int i = 0; i < kThreadStateCount; ++i)
        sums[o.tid][i] += o.event.args[i];
      last_ts[o.tid] = o.event.ts;
    }
    if (pass == 0)
      for (const auto& o : out)
        first_ts[o.tid] = o.event.ts;
    timespec d{0, 10'000'000};
    nanosleep(&d, nullptr);
  }
  // Read what /proc says of the spinner now, before it stops.
  SchedStat spin_end;
  const bool spin_read = ParseSchedStat(ReadProcFile(SchedStatPath(spinner_tid.load())), &spin_end);
  const uint64_t spin_end_ns = MonotonicNs();
  finish();
  ASSERT_TRUE(spin_read);

  const auto b = static_cast<uint32_t>(blocked_tid.load());
  const auto sp = static_cast<uint32_t>(spinner_tid.load());
  // The blocked thread: every nanosecond from the first pass to the last is a comm wait.
  const double b_span = static_cast<double>(last_ts[b] - first_ts[b]);
  EXPECT_NEAR(static_cast<double>(Sum(sums[b])), b_span, 1e3);
  EXPECT_GE(static_cast<double>(sums[b][static_cast<int>(ThreadState::kCommWait)]), 0.99 * b_span);
  // The spinner: running plus queued fill its span, and running is its CPU time within 5 points
  // of the span (the last few booked passes are repaid only at its next read).
  const double s_span = static_cast<double>(last_ts[sp] - first_ts[sp]);
  const StateSplit& ss = sums[sp];
  EXPECT_NEAR(static_cast<double>(Sum(ss)), s_span, 1e3);
  EXPECT_GE(static_cast<double>(ss[0] + ss[1]), 0.95 * s_span);
  const double cpu = static_cast<double>(spin_end.cpu_ns - spinner_cpu_begin) * s_span /
                     static_cast<double>(spin_end_ns - first_ts[sp]);
  EXPECT_NEAR(static_cast<double>(ss[0]), cpu, 0.05 * s_span);
  // And the skipping happened: far fewer reads than threads times passes.
  std::printf("threads %zu passes %d reads %llu booked without reading %llu\n", core.thread_count(),
              kPasses, static_cast<unsigned long long>(core.reads()),
              static_cast<unsigned long long>(core.assumed()));
  EXPECT_GE(core.assumed(), static_cast<uint64_t>(kPasses) / 2);
}

}  // namespace
}  // namespace parmon::sched
