// Unit tests of the /proc parsers and the thread-state accounting, on captured text.
#include <gtest/gtest.h>
#include <sys/syscall.h>

#include "sched/classify.h"
#include "sched/proc.h"
#include "sched/sched.h"

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
  ASSERT_TRUE(ParseStatusSwitches("Name:\tx\nState:\tS\nvoluntary_ctxt_switches:\t12\n"
                                  "nonvoluntary_ctxt_switches:\t3\n",
                                  &sc));
  EXPECT_EQ(sc.voluntary, 12u);
  EXPECT_EQ(sc.involuntary, 3u);
  EXPECT_FALSE(ParseStatusSwitches("Name:\tx\n", &sc));
}

TEST(ProcParse, ProcStatCpus) {
  std::vector<CpuTimes> cpus;
  ASSERT_TRUE(ParseProcStat("cpu  10 0 5 100 1 0 0 0 0 0\n"
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

uint64_t Sum(const StateSplit& s) {
  uint64_t t = 0;
  for (uint64_t v : s) t += v;
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

}  // namespace
}  // namespace parmon::sched
