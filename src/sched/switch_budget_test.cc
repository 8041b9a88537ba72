// SwitchBudget on hand-made record sequences whose share is known.
#include "sched/switch_budget.h"

#include <gtest/gtest.h>

namespace parmon::sched {
namespace {

constexpr uint64_t kMs = 1'000'000;

SwitchBudgetOptions Options(double share, uint32_t cpus) {
  SwitchBudgetOptions o;
  o.share = share;
  o.cost_ns = 500;
  o.window_ns = 100 * kMs;
  o.cpus = cpus;
  return o;
}

// Two threads taking turns on one CPU every `every_ns` for `ms` of record time: two records
// per turn.
void TakeTurns(SwitchBudget& b, uint64_t start, uint64_t ms, uint64_t every_ns) {
  bool first_on = true;
  for (uint64_t t = start; t < start + ms * kMs; t += every_ns) {
    b.Switch(t, first_on ? 1 : 2, true);
    b.Switch(t, first_on ? 2 : 1, false);
    first_on = !first_on;
  }
}

TEST(SwitchBudget, FrequentSwitchesGoOverTheBudget) {
  // A switch every 10 us on a 1-CPU machine: 20,000 records per 100 ms window x 500 ns = 10 ms
  // of a capacity of 100 ms (two threads, at most one CPU): 10%.
  SwitchBudget b(Options(0.05, 1));
  TakeTurns(b, 1 * kMs, 250, 10'000);
  ASSERT_TRUE(b.exceeded());
  EXPECT_EQ(b.over().records, 20'000u);
  EXPECT_EQ(b.over().threads, 2u);
  EXPECT_EQ(b.over().capacity_ns, 100 * kMs);
  EXPECT_NEAR(b.over().share, 0.10, 1e-9);
  EXPECT_EQ(b.over().begin_ns, 1 * kMs);  // the first window already
}

TEST(SwitchBudget, CapacityIsThreadsThatRanUpToTheCpus) {
  // The same two threads on a 4-CPU machine: two threads can use 200 ms of a 100 ms window.
  SwitchBudget b(Options(0.06, 4));
  TakeTurns(b, 1 * kMs, 250, 10'000);
  EXPECT_FALSE(b.exceeded());
  EXPECT_NEAR(b.max_share(), 0.05, 1e-9);
  EXPECT_EQ(b.windows(), 2u);
}

TEST(SwitchBudget, FewSwitchesStayUnder) {
  // A sleeper waking every millisecond: 200 records per window cost 0.1 ms of 100 ms.
  SwitchBudget b(Options(0.05, 2));
  for (uint64_t t = kMs; t < 1000 * kMs; t += kMs) {
    b.Switch(t, 7, false);
    b.Switch(t + 10'000, 7, true);
  }
  EXPECT_FALSE(b.exceeded());
  EXPECT_NEAR(b.max_share(), 200 * 500.0 / (100.0 * kMs), 1e-9);
}

TEST(SwitchBudget, NoBudgetNeverStops) {
  SwitchBudget b(Options(0, 1));
  TakeTurns(b, 1 * kMs, 500, 1'000);
  EXPECT_FALSE(b.exceeded());
  EXPECT_GT(b.max_share(), 0.5);
}

TEST(SwitchBudget, ThreadsOnACpuThroughAWindowCount) {
  // Thread 1 switches in and runs for 300 ms without a record; thread 2 switches in and out
  // every 50 us on the other CPU. Window 2 (no record of thread 1) counts both threads.
  SwitchBudget b(Options(1.0, 2));
  b.Switch(1 * kMs, 1, false);
  for (uint64_t t = 1 * kMs; t < 301 * kMs; t += 50'000)
    b.Switch(t, 2, (t / 50'000) % 2 == 0);
  b.Switch(301 * kMs, 1, true);
  // 2,000 records per window (one per 50 us), 2 threads on 2 CPUs: 1 ms of 200 ms.
  EXPECT_NEAR(b.max_share(), 2000 * 500.0 / (200.0 * kMs), 1e-5);
}

TEST(SwitchBudget, QuietStretchesAreSkipped) {
  // A burst, 10 s of nothing, a burst: the second burst is one window of its own, not spread
  // over the hundred empty ones.
  SwitchBudget b(Options(0.05, 1));
  TakeTurns(b, 1 * kMs, 50, 100'000);       // 1,000 records: 0.5 ms of 100: 0.5%
  TakeTurns(b, 10'001 * kMs, 100, 10'000);  // 20,000 records in one window: 10%
  b.Switch(10'200 * kMs, 1, true);
  ASSERT_TRUE(b.exceeded());
  EXPECT_NEAR(b.over().share, 0.10, 1e-9);
  EXPECT_EQ(b.windows(), 2u);
}

TEST(SwitchBudget, ExitedThreadsLeaveTheCapacity) {
  // Thread 5 is on a CPU and exits; afterwards only thread 1 switches: capacity one thread.
  SwitchBudget b(Options(1.0, 4));
  b.Switch(1 * kMs, 5, false);
  b.Exit(2 * kMs, 5);
  for (uint64_t t = 101 * kMs; t < 202 * kMs; t += 100'000)
    b.Switch(t, 1, (t / 100'000) % 2 == 0);
  b.Switch(301 * kMs, 1, true);
  // The second window: 1,000 records, one thread: 0.5 ms of 100 ms.
  EXPECT_NEAR(b.max_share(), 0.005, 1e-6);
}

}  // namespace
}  // namespace parmon::sched
