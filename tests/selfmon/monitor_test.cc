// The self-monitoring table without a recorder (docs/selfmon.md): a segment created here, the
// sampler's MonitorPublisher fed hand-made passes, and libparmon (loaded with dlopen once the
// segment exists) reading them through parmon_monitor_read. Checks the arithmetic of both read
// kinds, whole-process entries, the CPU table, re-watching, and that a read racing a publisher
// always sees one whole pass (the sequence lock).
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "format/kinds.h"
#include "parmon/parmon.h"
#include "recorder/segment.h"
#include "sched/events.h"
#include "sched/monitor.h"
#include "support/e2e.h"

namespace parmon {
namespace {

using format::Kind;
using sched::MakeEvent;
using sched::SamplerCore;

struct Api {
  int (*open)(parmon_monitor**);
  int (*watch)(parmon_monitor*, int32_t, int*);
  int (*watch_pid)(parmon_monitor*, int32_t, int32_t, int*);
  int (*read)(parmon_monitor*, int, parmon_thread_figures*, int);
  void (*close)(parmon_monitor*);
};

struct Fixture {
  std::unique_ptr<recorder::Segment> segment;
  Api api{};
};

Fixture& Shared() {
  static Fixture f;
  if (f.segment)
    return f;
  recorder::SegmentOptions so;
  so.ring_bytes = 64 << 10;
  so.ring_count = 4;
  auto seg = recorder::Segment::Create(so);
  EXPECT_TRUE(seg.ok()) << seg.status().message();
  f.segment = std::move(*seg);
  setenv(shm::kEnvSegment, f.segment->name().c_str(), 1);
  void* h = dlopen((testing::LibDir() + "/libparmon.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(h, nullptr) << dlerror();
  f.api.open = reinterpret_cast<decltype(f.api.open)>(dlsym(h, "parmon_monitor_open"));
  f.api.watch = reinterpret_cast<decltype(f.api.watch)>(dlsym(h, "parmon_monitor_watch"));
  f.api.watch_pid =
      reinterpret_cast<decltype(f.api.watch_pid)>(dlsym(h, "parmon_monitor_watch_pid"));
  f.api.read = reinterpret_cast<decltype(f.api.read)>(dlsym(h, "parmon_monitor_read"));
  f.api.close = reinterpret_cast<decltype(f.api.close)>(dlsym(h, "parmon_monitor_close"));
  return f;
}

shm::MonitorTable* Table() {
  return shm::Monitor(Shared().segment->header());
}

const uint32_t kPid = static_cast<uint32_t>(getpid());

// A ThreadStates output of (pid, tid) ending at ts: args in format::ThreadState order.
SamplerCore::Output States(uint32_t tid, uint64_t ts, std::vector<uint64_t> a) {
  a.resize(8, 0);
  return {kPid, tid, -1,
          MakeEvent(Kind::kThreadStates, ts, {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]})};
}
SamplerCore::Output Sample(uint32_t tid, uint64_t ts, uint64_t cpu) {
  return {kPid, tid, -1, MakeEvent(Kind::kThreadSample, ts, {0, cpu, 0, 'R', 0})};
}
SamplerCore::Output Cpu(int cpu, uint64_t ts, uint64_t busy, uint64_t idle) {
  return {0, 0, cpu, MakeEvent(Kind::kCpuSample, ts, {busy, idle, 0, 0})};
}

constexpr uint64_t kMs = 1'000'000;

TEST(Monitor, ReadsWhatThePublisherBooked) {
  Fixture& f = Shared();
  sched::MonitorPublisher pub(Table());
  parmon_monitor* m = nullptr;
  ASSERT_EQ(f.api.open(&m), PARMON_OK);
  int index = -1;
  ASSERT_EQ(f.api.watch(m, 1001, &index), PARMON_OK);
  EXPECT_EQ(index, 0);
  ASSERT_EQ(f.api.watch(m, 1002, &index), PARMON_OK);
  ASSERT_EQ(f.api.watch(m, PARMON_PROCESS, &index), PARMON_OK);
  EXPECT_EQ(index, 2);
  parmon_thread_figures out[3];
  // Nothing published yet.
  ASSERT_EQ(f.api.read(m, PARMON_SINCE_LAST_READ, out, 3), 3);
  for (const auto& o : out)
    EXPECT_EQ(o.flags, static_cast<uint32_t>(PARMON_FIGURES_NONE));
  // Pass 1 (100..110 ms): 1001 runs 6 and queues 4; 1002 sleeps 7, is stopped 2, other 1.
  pub.Publish({States(1001, 110 * kMs, {6 * kMs, 4 * kMs}), Sample(1001, 110 * kMs, 1),
               States(1002, 110 * kMs, {0, 0, 0, 0, 7 * kMs, 0, 2 * kMs, 1 * kMs}),
               Cpu(1, 110 * kMs, 30 * kMs, 10 * kMs)},
              110 * kMs, 10 * kMs);
  // Pass 2 (110..120 ms): 1001 runs 10; 1002 waits on a lock 10.
  pub.Publish({States(1001, 120 * kMs, {10 * kMs}), States(1002, 120 * kMs, {0, 0, 0, 10 * kMs})},
              120 * kMs, 10 * kMs);
  ASSERT_EQ(f.api.read(m, PARMON_SINCE_LAST_READ, out, 3), 3);
  EXPECT_EQ(out[0].tid, 1001);
  EXPECT_EQ(out[0].flags, 0u);
  EXPECT_EQ(out[0].start_ns, 100 * kMs);
  EXPECT_EQ(out[0].end_ns, 120 * kMs);
  EXPECT_EQ(out[0].elapsed_ns, 20 * kMs);
  EXPECT_EQ(out[0].states_ns[PARMON_STATE_RUNNING], 16 * kMs);
  EXPECT_EQ(out[0].states_ns[PARMON_STATE_QUEUED], 4 * kMs);
  EXPECT_EQ(out[0].cpu_ns, 16 * kMs);
  EXPECT_DOUBLE_EQ(out[0].utilisation, 0.8);
  EXPECT_EQ(out[0].cpu, 1);
  EXPECT_DOUBLE_EQ(out[0].cpu_busy, 0.75);  // CPU 1's only sample: 30 of 40 ms busy
  EXPECT_EQ(out[1].states_ns[PARMON_STATE_TIMER], 7 * kMs);
  EXPECT_EQ(out[1].states_ns[PARMON_STATE_OTHER], 3 * kMs);  // stopped + other wait
  EXPECT_EQ(out[1].states_ns[PARMON_STATE_LOCK], 10 * kMs);
  EXPECT_EQ(out[1].cpu, -1);
  EXPECT_EQ(out[1].cpu_busy, -1.0);
  // The process: both threads summed.
  EXPECT_EQ(out[2].tid, 0);
  EXPECT_EQ(out[2].threads, 2u);
  EXPECT_EQ(out[2].elapsed_ns, 20 * kMs);
  EXPECT_EQ(out[2].states_ns[PARMON_STATE_RUNNING], 16 * kMs);
  EXPECT_DOUBLE_EQ(out[2].utilisation, 0.8);
  // The latest pass alone, which does not move the baseline.
  ASSERT_EQ(f.api.read(m, PARMON_LAST_INTERVAL, out, 3), 3);
  EXPECT_EQ(out[0].start_ns, 110 * kMs);
  EXPECT_EQ(out[0].end_ns, 120 * kMs);
  EXPECT_EQ(out[0].states_ns[PARMON_STATE_RUNNING], 10 * kMs);
  EXPECT_EQ(out[0].states_ns[PARMON_STATE_QUEUED], 0u);
  // No pass since the previous read: nothing to say.
  ASSERT_EQ(f.api.read(m, PARMON_SINCE_LAST_READ, out, 3), 3);
  EXPECT_EQ(out[0].flags & PARMON_FIGURES_NONE, static_cast<uint32_t>(PARMON_FIGURES_NONE));
  EXPECT_EQ(out[0].elapsed_ns, 0u);
  // Pass 3: only what came since the read; CPU 1 busy over the span from the CPU table's delta.
  pub.Publish({States(1001, 130 * kMs, {5 * kMs, 5 * kMs}),
               Cpu(1, 130 * kMs, 5 * kMs, 15 * kMs),
               {kPid, 1001, -1, MakeEvent(Kind::kTaskExit, 130 * kMs, {0})}},
              130 * kMs, 10 * kMs);
  ASSERT_EQ(f.api.read(m, PARMON_SINCE_LAST_READ, out, 2), 2);  // only the first two wanted
  EXPECT_EQ(out[0].start_ns, 120 * kMs);
  EXPECT_EQ(out[0].elapsed_ns, 10 * kMs);
  EXPECT_EQ(out[0].states_ns[PARMON_STATE_QUEUED], 5 * kMs);
  EXPECT_DOUBLE_EQ(out[0].cpu_busy, 0.25);
  EXPECT_EQ(out[0].flags, static_cast<uint32_t>(PARMON_FIGURES_EXITED));
  EXPECT_EQ(out[1].flags & PARMON_FIGURES_NONE, static_cast<uint32_t>(PARMON_FIGURES_NONE));
  EXPECT_EQ(f.api.read(m, 7, out, 3), -PARMON_E_INVALID);
  f.api.close(m);
  // Closed: the entries are free, and a new watch starts from zero.
  for (uint32_t i = 0; i < 3; ++i)
    EXPECT_EQ(Table()->entries[i].state.load(), static_cast<uint32_t>(shm::kMonitorFree));
  ASSERT_EQ(f.api.open(&m), PARMON_OK);
  ASSERT_EQ(f.api.watch(m, 1001, nullptr), PARMON_OK);
  pub.Publish({States(1001, 140 * kMs, {1 * kMs, 9 * kMs})}, 140 * kMs, 10 * kMs);
  ASSERT_EQ(f.api.read(m, PARMON_SINCE_LAST_READ, out, 1), 1);
  EXPECT_EQ(out[0].start_ns, 130 * kMs);
  EXPECT_EQ(out[0].states_ns[PARMON_STATE_RUNNING], 1 * kMs);
  EXPECT_EQ(out[0].flags, 0u);
  f.api.close(m);
}

TEST(Monitor, ReadsRacingThePublisherSeeWholePasses) {
  Fixture& f = Shared();
  sched::MonitorPublisher pub(Table());
  parmon_monitor* m = nullptr;
  ASSERT_EQ(f.api.open(&m), PARMON_OK);
  constexpr int kThreads = 64;
  for (int t = 0; t < kThreads; ++t)
    ASSERT_EQ(f.api.watch(m, 2000 + t, nullptr), PARMON_OK);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    // Every pass books 10 ms per thread, split differently each time; the passes end at
    // multiples of 10 ms, so every read's span and states must add up for every thread alike.
    for (uint64_t pass = 1; !stop.load(std::memory_order_relaxed); ++pass) {
      std::vector<SamplerCore::Output> out;
      const uint64_t run = (pass * 7919) % (10 * kMs);
      for (int t = 0; t < kThreads; ++t)
        out.push_back(States(2000 + t, 1000 * kMs + pass * 10 * kMs, {run, 10 * kMs - run}));
      pub.Publish(out, 1000 * kMs + pass * 10 * kMs, 10 * kMs);
    }
  });
  parmon_thread_figures out[kThreads];
  int bad = 0, reads = 0;
  // 20,000 reads, and on until 100 saw a pass (a loaded machine may not run the writer before the
  // first 20,000 are done), for at most 60 s.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < 20000 || (reads <= 100 && std::chrono::steady_clock::now() < until); ++i) {
    const int n =
        f.api.read(m, i % 2 ? PARMON_LAST_INTERVAL : PARMON_SINCE_LAST_READ, out, kThreads);
    ASSERT_EQ(n, kThreads);
    if (out[0].flags & PARMON_FIGURES_NONE)
      continue;
    ++reads;
    for (int t = 0; t < kThreads; ++t) {
      const auto& o = out[t];
      bad += o.start_ns != out[0].start_ns || o.end_ns != out[0].end_ns ||
             o.states_ns[0] != out[0].states_ns[0] ||
             o.states_ns[0] + o.states_ns[1] != o.elapsed_ns;
    }
  }
  stop = true;
  writer.join();
  EXPECT_GT(reads, 100);
  EXPECT_EQ(bad, 0);
  f.api.close(m);
}

// Another process of the session (an MPI rank under the same recorder): watched by pid once one
// of its threads has a ring; its thread's MPI time (RingControl::mpi_ticks, here as a rank's
// libparmon_mpi would keep it) is moved out of its states into comm as the report moves it:
// waits first, then running and queued in proportion.
TEST(Monitor, OtherRanksAndTheirMpiTime) {
  Fixture& f = Shared();
  shm::SegmentHeader* h = Shared().segment->header();
  shm::RingControl& ring = shm::Rings(h)[h->ring_count - 1];
  ASSERT_EQ(ring.state.load(), static_cast<uint32_t>(shm::kFree));
  const uint32_t rank_pid = kPid + 100000, rank_tid = rank_pid;
  ring.pid = rank_pid;
  ring.tid = rank_tid;
  ring.mpi_ticks.store(7 * kMs);  // before the watch: not counted
  ring.state.store(shm::kClaimed);
  sched::MonitorPublisher pub(Table(), h, TickConversion{});  // ticks are ns here
  parmon_monitor* m = nullptr;
  ASSERT_EQ(f.api.open(&m), PARMON_OK);
  int index = -1;
  EXPECT_EQ(f.api.watch_pid(m, static_cast<int32_t>(rank_pid + 1), 1, &index), PARMON_E_INVALID);
  EXPECT_EQ(f.api.watch_pid(m, static_cast<int32_t>(rank_pid), PARMON_SELF, &index),
            PARMON_E_INVALID);
  ASSERT_EQ(
      f.api.watch_pid(m, static_cast<int32_t>(rank_pid), static_cast<int32_t>(rank_tid), &index),
      PARMON_OK);
  EXPECT_EQ(index, 0);
  ASSERT_EQ(f.api.watch_pid(m, static_cast<int32_t>(rank_pid), PARMON_PROCESS, &index), PARMON_OK);
  EXPECT_EQ(index, 1);
  auto states = [&](uint64_t ts, std::vector<uint64_t> a) {
    SamplerCore::Output o = States(rank_tid, ts, std::move(a));
    o.pid = rank_pid;
    return o;
  };
  // Pass 1: the baseline of its MPI time. Pass 2: 5 ms more inside MPI (Open MPI polled: the
  // kernel saw it run 8 and queue 2). Pass 3: 6 ms inside MPI, of which it slept 4 and ran 2.
  pub.Publish({states(110 * kMs, {10 * kMs})}, 110 * kMs, 10 * kMs);
  parmon_thread_figures out[2];
  ASSERT_EQ(f.api.read(m, PARMON_SINCE_LAST_READ, out, 2), 2);
  ring.mpi_ticks.store(12 * kMs);
  pub.Publish({states(120 * kMs, {8 * kMs, 2 * kMs})}, 120 * kMs, 10 * kMs);
  ring.mpi_ticks.store(18 * kMs);
  pub.Publish({states(130 * kMs, {6 * kMs, 0, 0, 0, 4 * kMs})}, 130 * kMs, 10 * kMs);
  ASSERT_EQ(f.api.read(m, PARMON_SINCE_LAST_READ, out, 2), 2);
  for (const parmon_thread_figures& o : out) {
    EXPECT_EQ(o.flags, 0u);
    EXPECT_EQ(o.elapsed_ns, 20 * kMs);
    EXPECT_EQ(o.states_ns[PARMON_STATE_COMM], 11 * kMs);
    EXPECT_EQ(o.states_ns[PARMON_STATE_RUNNING], 4 * kMs + 4 * kMs);
    EXPECT_EQ(o.states_ns[PARMON_STATE_QUEUED], 1 * kMs);
    EXPECT_EQ(o.states_ns[PARMON_STATE_TIMER], 0u);
  }
  EXPECT_EQ(out[0].tid, static_cast<int32_t>(rank_tid));
  EXPECT_EQ(out[1].tid, 0);
  // A call open since 1 ms before the pass (word: open bit, entry time - finished calls).
  EXPECT_EQ(shm::MpiTicksAt(shm::kMpiCallOpen | (100 * kMs - 18 * kMs), 101 * kMs), 19 * kMs);
  f.api.close(m);
  ring.state.store(shm::kFree);
  ring.mpi_ticks.store(0);
}

}  // namespace
}  // namespace parmon
