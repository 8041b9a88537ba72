// Each diagnosis rule on hand-built Results: the finding it makes, and none below its threshold.
#include "analysis/rules/rules.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analysis/engine.h"

namespace parmon::analysis::rules {
namespace {

constexpr uint64_t kMs = 1000000;

LocationResult Thread(uint32_t id, const std::string& label, int32_t rank = -1) {
  LocationResult l;
  l.id = id;
  l.kind = "thread";
  l.pid = id;
  l.tid = id;
  l.rank = rank;
  l.label = label;
  l.wall_ns = 100 * kMs;
  l.compute_ns = 100 * kMs;
  l.states[static_cast<int>(State::kRunning)] = 100 * kMs;
  return l;
}

// A channel link between two thread locations (ids from, to), matched to them by id.
LinkResult Link(int64_t from, int64_t to, uint64_t sender_wait, uint64_t receiver_wait) {
  LinkResult k;
  k.type = LinkKind::kChannel;
  k.kind = "channel";
  k.from = k.from_location = from;
  k.to = k.to_location = to;
  k.from_label = std::string(1, static_cast<char>('A' + from - 1));
  k.to_label = std::string(1, static_cast<char>('A' + to - 1));
  k.messages = 10;
  k.sender_wait_ns = sender_wait;
  k.receiver_wait_ns = receiver_wait;
  k.wait_ns = sender_wait + receiver_wait;
  k.time_ns = k.wait_ns;
  return k;
}

std::vector<Finding> Apply(RuleFn rule, const Results& r) {
  std::vector<Finding> out;
  rule(r, BuildGraph(r), &out);
  return out;
}

TEST(Rules, RegistryHoldsEveryRuleOnce) {
  std::vector<std::string> names;
  for (const Rule& rule : Registry())
    names.push_back(rule.name);
  EXPECT_EQ(names, (std::vector<std::string>{"crash", "link-wait", "queued", "imbalance",
                                             "collective-wait", "lock-wait", "io-wait",
                                             "timer-wait", "cpu-bound"}));
}

// Two workers computing 95% of the run on 2 CPUs beside a writer parked on a lock (pigz -p 2):
// the program is CPU-bound, and the writer's wait, all of it while the workers kept both CPUs
// busy, is idle time, not a finding. With one worker only, a CPU is free: the wait is one.
TEST(Rules, CpuBoundProgramIsSaidAndItsIdleWaiterIsNoBottleneck) {
  Results r;
  r.summary.cpus = 2;
  r.summary.duration_ns = 100 * kMs;
  r.intervals.interval_ns = 10 * kMs;
  r.intervals.count = 10;
  auto add = [&](uint32_t tid, const char* name, State s, uint64_t per_interval) {
    LocationResult l = Thread(tid, name);
    l.sampled = true;
    l.states = {};
    l.states[static_cast<int>(State::kRunning)] = 100 * kMs - 10 * per_interval;
    l.states[static_cast<int>(s)] += 10 * per_interval;
    l.compute_ns = l.states[static_cast<int>(State::kRunning)];
    r.locations.push_back(l);
    StateTimes st{};
    st[static_cast<int>(State::kRunning)] = 10 * kMs - per_interval;
    st[static_cast<int>(s)] += per_interval;
    r.intervals.location_states.push_back(std::vector<StateTimes>(10, st));
  };
  add(1, "pigz-writer", State::kLockWait, 10 * kMs);
  add(2, "pigz-worker-1", State::kRunning, 0);
  add(3, "pigz-worker-2", State::kRunnable, kMs / 2);
  Diagnose(&r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].id, "cpu-bound");
  EXPECT_EQ(r.findings[0].text,
            "the program is CPU-bound on 2 CPUs: its threads computed 98% of the CPUs' time");
  for (const Finding& f : r.findings)
    EXPECT_NE(f.id, "lock-wait") << f.text;
  r.locations.pop_back();
  r.intervals.location_states.pop_back();
  r.findings.clear();
  Diagnose(&r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].id, "lock-wait");
  for (const Finding& f : r.findings)
    EXPECT_NE(f.id, "cpu-bound") << f.text;
}

// A writer feeding three readers through one pipe on 2 busy CPUs (tests/comm pipe_readers): it
// waits 45% of the run on the pipe, 15% on each reader's link, while each reader waits 70% for
// its data. The readers together are the writer's bottleneck; the writer, blocked on them, is
// not a late sender to any one of them.
TEST(Rules, ReadersOfOneChannelAreNotToldTheirBlockedWriterSendsLate) {
  Results r;
  r.locations = {Thread(1, "A"), Thread(2, "B"), Thread(3, "C"), Thread(4, "D")};
  for (int64_t reader : {2, 3, 4}) {
    r.links.push_back(Link(1, reader, 15 * kMs, 70 * kMs));
    r.links.back().channel = "pipe:1";
  }
  std::vector<Finding> f = Apply(LinkWaitRule, r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "link-wait-send");
  EXPECT_NE(f[0].text.find("A waits 45% of the run sending to the 3 readers of one channel"),
            std::string::npos)
      << f[0].text;
  // A writer that waits little on its readers is late: each reader's wait names it.
  for (auto& k : r.links)
    k.sender_wait_ns = 2 * kMs;
  f = Apply(LinkWaitRule, r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "link-wait-receive");
  EXPECT_NE(f[0].text.find("A sends late"), std::string::npos) << f[0].text;
}

TEST(Rules, LinkWaitNamesTheBottleneckAtTheEndOfTheChain) {
  // A -> B -> C; B waits 50% sending to C, A waits 40% sending to B: C is the bottleneck.
  Results r;
  r.locations = {Thread(1, "A"), Thread(2, "B"), Thread(3, "C")};
  r.links = {Link(1, 2, 40 * kMs, 0), Link(2, 3, 50 * kMs, 0)};
  std::vector<Finding> f = Apply(LinkWaitRule, r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "link-wait-send");
  ASSERT_GT(f[0].subjects.size(), 2u);
  EXPECT_EQ(f[0].subjects[2], "C");
  EXPECT_EQ(f[0].time_at_stake_ns, 50 * kMs);
  // Ends are matched by location id, not by label: the same links with their labels swapped
  // still name C.
  r.locations[0].label = "C";
  r.locations[2].label = "A";
  f = Apply(LinkWaitRule, r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].subjects[2], "A");  // location 3, whatever its label
  // Below the threshold: nothing.
  r.links = {Link(1, 2, 5 * kMs, 0)};
  EXPECT_TRUE(Apply(LinkWaitRule, r).empty());
}

// A ping-pong: A waits 32% receiving from B and B 30% receiving from A. Neither is the other's
// bottleneck (which one "sends late" would change with noise from run to run): one finding
// names both as waiting on each other. A third party that waits on them is its evidence. When B
// computes and does not wait, B is the late sender again.
TEST(Rules, PartiesWaitingOnEachOtherInTurnAreOneFindingWithNoBottleneck) {
  Results r;
  r.locations = {Thread(1, "A"), Thread(2, "B"), Thread(3, "C")};
  r.links = {Link(2, 1, 0, 32 * kMs), Link(1, 2, 0, 30 * kMs), Link(1, 3, 0, 20 * kMs)};
  std::vector<Finding> f = Apply(LinkWaitRule, r);
  ASSERT_EQ(f.size(), 1u) << f[0].text;
  EXPECT_EQ(f[0].id, "link-wait-cycle");
  EXPECT_EQ(f[0].text,
            "A and B wait on each other in turn, each receiving from the other (of the run: A "
            "32%, B 30%): neither is the bottleneck, the exchange itself sets the pace (the "
            "work between messages and each message's latency); they compute 100% and 100% of "
            "the time");
  EXPECT_EQ(f[0].subjects, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(f[0].time_at_stake_ns, 32 * kMs);
  EXPECT_NE(f[0].evidence.find("(C waits 20% receiving from A)"), std::string::npos)
      << f[0].evidence;
  // Three in a ring, each waiting on the next: one finding with all three.
  r.links = {Link(2, 1, 0, 30 * kMs), Link(3, 2, 0, 30 * kMs), Link(1, 3, 0, 30 * kMs)};
  f = Apply(LinkWaitRule, r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "link-wait-cycle");
  EXPECT_NE(f[0].text.find("A, B and C wait on each other in turn, each receiving from the next"),
            std::string::npos)
      << f[0].text;
  // B waits, but less than the chain follows (A 32%, B 15%): still one exchange, both shares.
  r.links = {Link(2, 1, 0, 32 * kMs), Link(1, 2, 0, 15 * kMs)};
  f = Apply(LinkWaitRule, r);
  ASSERT_EQ(f.size(), 1u) << f[1].text;
  EXPECT_EQ(f[0].id, "link-wait-cycle");
  EXPECT_NE(f[0].text.find("(of the run: A 32%, B 15%)"), std::string::npos) << f[0].text;
  // Both wait less than the chain follows (A 20%, B 14%: each chase stops at the other): the
  // same exchange, not two findings that each call the other the bottleneck.
  r.links = {Link(2, 1, 0, 20 * kMs), Link(1, 2, 0, 14 * kMs)};
  f = Apply(LinkWaitRule, r);
  ASSERT_EQ(f.size(), 1u) << f[1].text;
  EXPECT_EQ(f[0].id, "link-wait-cycle");
  EXPECT_NE(f[0].text.find("(of the run: A 20%, B 14%)"), std::string::npos) << f[0].text;
  // B hardly waits: it is late, and the finding says so.
  r.links = {Link(2, 1, 0, 32 * kMs), Link(1, 2, 0, 2 * kMs)};
  f = Apply(LinkWaitRule, r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "link-wait-receive");
  EXPECT_NE(f[0].text.find("B sends late"), std::string::npos) << f[0].text;
}

TEST(Rules, QueuedThreads) {
  Results r;
  r.summary.cpus = 1;
  for (uint32_t i = 1; i <= 3; ++i) {
    LocationResult l = Thread(i, "t" + std::to_string(i));
    l.state_source = "sampled";
    l.sampled = true;
    l.states[static_cast<int>(State::kRunning)] = 50 * kMs;
    l.states[static_cast<int>(State::kRunnable)] = 50 * kMs;
    r.locations.push_back(l);
  }
  std::vector<Finding> f = Apply(QueuedRule, r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "queued");
  // 150 ms queued over three threads: the run could end 50 ms sooner with a CPU each.
  EXPECT_EQ(f[0].time_at_stake_ns, 50 * kMs);
  EXPECT_EQ(f[0].thread_time_ns, 150 * kMs);
  for (auto& l : r.locations)
    l.states[static_cast<int>(State::kRunnable)] = kMs;  // 2%: not worth a finding
  EXPECT_TRUE(Apply(QueuedRule, r).empty());
}

// An MPI job: two ranks queued half their time, beside the launcher and an MPI helper thread
// that sleep. The share is of the ranks' threads' time, not diluted by the others, which the
// evidence names as left out (issue 11, item 3).
TEST(Rules, QueuedShareOfAnMpiJobIsTheRanksNotTheLaunchers) {
  Results r;
  r.summary.cpus = 2;
  auto add = [&](uint32_t id, const char* label, int32_t rank, bool main, uint64_t run,
                 uint64_t queued) {
    LocationResult l = Thread(id, label, rank);
    l.sampled = true;
    l.main_thread = main;
    l.pid = rank >= 0 ? 100 + static_cast<uint32_t>(rank) : id;
    l.states = {};
    l.states[static_cast<int>(State::kRunning)] = run;
    l.states[static_cast<int>(State::kRunnable)] = queued;
    l.states[static_cast<int>(State::kCommWait)] = 100 * kMs - run - queued;
    l.compute_ns = run;
    r.locations.push_back(l);
  };
  add(1, "rank 0", 0, true, 50 * kMs, 50 * kMs);
  add(2, "rank 1", 1, true, 50 * kMs, 50 * kMs);
  add(3, "rank 0 tid 3", 0, false, kMs, kMs);  // an MPI progress thread
  add(4, "mpirun (4)", -1, false, 2 * kMs, 2 * kMs);
  add(5, "mpirun (5)", -1, false, kMs, 0);
  std::vector<Finding> f = Apply(QueuedRule, r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].text.find("50% of the ranks' threads' time is spent queued"), std::string::npos)
      << f[0].text;
  EXPECT_NE(f[0].evidence.find("100 ms queued of 200 ms sampled time of the ranks' 2 threads"),
            std::string::npos)
      << f[0].evidence;
  EXPECT_NE(f[0].evidence.find("left out: 3 launcher processes and MPI helper threads, queued "
                               "3.00 ms in all"),
            std::string::npos)
      << f[0].evidence;
  EXPECT_EQ(f[0].time_at_stake_ns, 50 * kMs);
  EXPECT_EQ(f[0].subjects, (std::vector<std::string>{"rank 1", "rank 0"}));
}

TEST(Rules, Imbalance) {
  Results r;
  r.imbalance.over = "ranks";
  r.imbalance.members = 2;
  r.imbalance.max_compute_ns = 100 * kMs;
  r.imbalance.mean_compute_ns = 75 * kMs;
  r.imbalance.percent = 25;
  r.imbalance.max_label = "rank 0";
  std::vector<Finding> f = Apply(ImbalanceRule, r);
  ASSERT_EQ(f.size(), 1u);
  // Balanced, the run would end max - mean = 25 ms sooner; the other rank idles 50 ms in all.
  EXPECT_EQ(f[0].time_at_stake_ns, 25 * kMs);
  EXPECT_EQ(f[0].thread_time_ns, 50 * kMs);
  r.imbalance.percent = 5;
  EXPECT_TRUE(Apply(ImbalanceRule, r).empty());
}

TEST(Rules, CollectiveWait) {
  Results r;
  r.locations = {Thread(1, "rank 0", 0), Thread(2, "rank 1", 1)};
  r.locations[0].barrier_wait_ns = 20 * kMs;
  WaitStateResult w;
  w.kind = WaitPattern::kBarrier;
  w.pattern = "wait at barrier";
  w.location = 1;
  w.location_label = "rank 0";
  w.call = "MPI_Barrier";
  w.ns = 20 * kMs;
  r.wait_states = {w};
  std::vector<Finding> f = Apply(CollectiveWaitRule, r);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].id, "collective-wait");
  EXPECT_EQ(f[0].subjects, std::vector<std::string>{"rank 0"});
  r.locations[0].barrier_wait_ns = kMs;
  EXPECT_TRUE(Apply(CollectiveWaitRule, r).empty());
}

TEST(Rules, StateWaits) {
  Results r;
  r.locations = {Thread(1, "worker")};
  r.locations[0].states[static_cast<int>(State::kLockWait)] = 30 * kMs;
  r.locations[0].states[static_cast<int>(State::kIoWait)] = 20 * kMs;
  r.locations[0].states[static_cast<int>(State::kTimerWait)] = 5 * kMs;
  std::vector<Finding> lock = Apply(LockWaitRule, r);
  ASSERT_EQ(lock.size(), 1u);
  EXPECT_EQ(lock[0].id, "lock-wait");
  EXPECT_EQ(Apply(IoWaitRule, r).size(), 1u);
  EXPECT_TRUE(Apply(TimerWaitRule, r).empty());  // 5%: below the threshold
}

// Four threads queued 20 ms each (80 ms of thread time, 20 ms of the run's wall time to save)
// and one thread waiting 50 ms on a lock: the lock comes first, and no finding puts more than
// the run's wall time at stake. (On 8 CPUs, which they keep 46% busy: not CPU-bound.)
TEST(Rules, DiagnoseRanksByWallTimeToSave) {
  Results r;
  r.summary.cpus = 8;
  r.summary.duration_ns = 100 * kMs;
  for (uint32_t i = 1; i <= 4; ++i) {
    LocationResult l = Thread(i, "t" + std::to_string(i));
    l.sampled = true;
    l.states[static_cast<int>(State::kRunning)] = 80 * kMs;
    l.states[static_cast<int>(State::kRunnable)] = 20 * kMs;
    r.locations.push_back(l);
  }
  LocationResult w = Thread(5, "waiter");
  w.states[static_cast<int>(State::kRunning)] = 50 * kMs;
  w.states[static_cast<int>(State::kLockWait)] = 50 * kMs;
  r.locations.push_back(w);
  Diagnose(&r);
  ASSERT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[0].id, "lock-wait");
  EXPECT_EQ(r.findings[0].time_at_stake_ns, 50 * kMs);
  EXPECT_EQ(r.findings[1].id, "queued");
  EXPECT_EQ(r.findings[1].time_at_stake_ns, 20 * kMs);
  EXPECT_EQ(r.findings[1].thread_time_ns, 80 * kMs);
  // A window shorter than a thread's own wall time: still capped at the window.
  r.summary.duration_ns = 30 * kMs;
  Diagnose(&r);
  for (const Finding& f : r.findings)
    EXPECT_LE(f.time_at_stake_ns, 30 * kMs) << f.id;
}

TEST(Rules, DiagnoseRanksByTimeAtStake) {
  Results r;
  r.locations = {Thread(1, "worker")};
  r.locations[0].states[static_cast<int>(State::kLockWait)] = 30 * kMs;
  r.locations[0].states[static_cast<int>(State::kIoWait)] = 40 * kMs;
  Diagnose(&r);
  ASSERT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[0].id, "io-wait");
  EXPECT_EQ(r.findings[1].id, "lock-wait");
}

}  // namespace
}  // namespace parmon::analysis::rules
