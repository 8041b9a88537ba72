// SwitchBudget on hand-made record sequences whose share is known.
#include "sched/switch_budget.h"

#include <gtest/gtest.h>

namespace parmon::sched {
namespace {

constexpr uint64_t kMs = 1'000'000;

SwitchBudgetOptions Options(double share) {
  SwitchBudgetOptions o;
  o.share = share;
  o.cost_ns = 500;
  o.window_ns = 100 * kMs;
  return o;
}

// Two threads taking turns on one CPU every `every_ns` for `ms` of record time: two records
// per turn, one thread on the CPU at any time.
void TakeTurns(SwitchBudget& b, uint64_t start, uint64_t ms, uint64_t every_ns) {
  bool first_on = true;
  for (uint64_t t = start; t < start + ms * kMs; t += every_ns) {
    b.Switch(t, first_on ? 1 : 2, true);
    b.Switch(t, first_on ? 2 : 1, false);
    first_on = !first_on;
  }
}

TEST(SwitchBudget, FrequentSwitchesGoOverTheBudget) {
  // A switch every 10 us: 20,000 records per 100 ms window x 500 ns = 10 ms of the 100 ms of CPU
  // the two threads had between them: 10%.
  SwitchBudget b(Options(0.05));
  TakeTurns(b, 1 * kMs, 250, 10'000);
  ASSERT_TRUE(b.exceeded());
  EXPECT_EQ(b.over().records, 20'000u);
  EXPECT_EQ(b.over().cpu_ns, 100 * kMs);
  EXPECT_NEAR(b.over().share, 0.10, 1e-9);
  EXPECT_EQ(b.over().begin_ns, 1 * kMs);  // the first window already
}

TEST(SwitchBudget, TheShareIsOfTheProgramsCpuTime) {
  // Two threads each on a CPU of its own all along, each switched out and straight back in every
  // 10 us: 40,000 records per window x 500 ns = 20 ms of 200 ms of CPU: 10% again.
  SwitchBudget b(Options(0.11));
  for (uint64_t t = 1 * kMs; t < 251 * kMs; t += 10'000)
    for (uint32_t tid : {1u, 2u}) {
      b.Switch(t, tid, true);
      b.Switch(t, tid, false);
    }
  EXPECT_FALSE(b.exceeded());
  EXPECT_NEAR(b.max_share(), 0.10, 1e-9);
  EXPECT_EQ(b.windows(), 2u);
}

TEST(SwitchBudget, AMostlySleepingProgramIsJudgedAgainstTheWindow) {
  // A sleeper waking every millisecond for 10 us: 200 records per window, 1 ms of CPU. Against
  // its CPU time they would be 10%; against the window's 100 ms they cost 0.1%.
  SwitchBudget b(Options(0.05));
  for (uint64_t t = kMs; t < 1000 * kMs; t += kMs) {
    b.Switch(t, 7, false);
    b.Switch(t + 10'000, 7, true);
  }
  EXPECT_FALSE(b.exceeded());
  EXPECT_NEAR(b.max_share(), 200 * 500.0 / (100.0 * kMs), 1e-9);
}

TEST(SwitchBudget, NoBudgetNeverStops) {
  SwitchBudget b(Options(0));
  TakeTurns(b, 1 * kMs, 500, 1'000);
  EXPECT_FALSE(b.exceeded());
  EXPECT_GT(b.max_share(), 0.5);
}

TEST(SwitchBudget, ThreadsOnACpuThroughAWindowCount) {
  // Thread 1 switches in and runs for 300 ms without a record; thread 2 runs half the time,
  // switching every 50 us. A window: 2,000 records against 100 + 50 ms of CPU.
  SwitchBudget b(Options(1.0));
  b.Switch(1 * kMs, 1, false);
  for (uint64_t t = 1 * kMs; t < 301 * kMs; t += 50'000)
    b.Switch(t, 2, (t / 50'000) % 2 == 0);
  b.Switch(301 * kMs, 1, true);
  EXPECT_EQ(b.windows(), 3u);
  EXPECT_NEAR(b.max_share(), 2001 * 500.0 / (150.0 * kMs), 1e-5);
}

TEST(SwitchBudget, AThreadFirstSeenSwitchingOutRanSinceTheWindowBegan) {
  SwitchBudget b(Options(1.0));
  b.Switch(1 * kMs, 3, false);  // the window begins
  b.Switch(51 * kMs, 4, true);  // on a CPU since before: 50 ms of this window
  b.Switch(51 * kMs, 3, true);  // 50 ms
  b.Switch(201 * kMs, 3, false);
  // 3 records of 500 ns against the 100 ms of CPU of the two threads.
  EXPECT_NEAR(b.max_share(), 3 * 500.0 / (100.0 * kMs), 1e-12);
}

TEST(SwitchBudget, QuietStretchesAreSkipped) {
  // A burst, 10 s of nothing, a burst: the second burst is one window of its own, not spread
  // over the hundred empty ones.
  SwitchBudget b(Options(0.05));
  TakeTurns(b, 1 * kMs, 50, 100'000);       // 1,000 records: 0.5 ms of 100: 0.5%
  TakeTurns(b, 10'001 * kMs, 100, 10'000);  // 20,000 records in one window: 10%
  b.Switch(10'200 * kMs, 1, true);
  ASSERT_TRUE(b.exceeded());
  EXPECT_NEAR(b.over().share, 0.10, 1e-9);
  EXPECT_EQ(b.windows(), 2u);
}

TEST(SwitchBudget, ExitedThreadsStopRunning) {
  // Thread 5 is on a CPU from 1 ms and exits at 2 ms; thread 6 runs through the first window.
  SwitchBudget b(Options(1.0));
  b.Switch(1 * kMs, 5, false);
  b.Switch(1 * kMs, 6, false);
  b.Exit(2 * kMs, 5);
  for (int i = 0; i < 1000; ++i)
    b.Switch(50 * kMs, 6, false);  // 1,000 switch-ins whose switch-outs were lost: still on it
  b.Switch(101 * kMs, 6, true);    // closes the window: 1 ms + 100 ms of CPU
  EXPECT_NEAR(b.max_share(), 1002 * 500.0 / (101.0 * kMs), 1e-9);
}

}  // namespace
}  // namespace parmon::sched
