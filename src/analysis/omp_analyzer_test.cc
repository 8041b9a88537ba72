// OmpAnalyzer on hand-made OMPT event sequences (the shapes libparmon_omp writes): per-thread
// work, barrier and lock waits, idle and serial time, and a region's imbalance.
#include "analysis/omp_analyzer.h"

#include <gtest/gtest.h>

namespace parmon::analysis {
namespace {

using format::Kind;

format::Event Ev(uint64_t ts, Kind k, std::initializer_list<uint64_t> args) {
  format::Event e;
  e.ts = ts;
  e.kind = static_cast<uint16_t>(k);
  for (uint64_t a : args)
    e.args[e.nargs++] = a;
  return e;
}

OmpProfile Build(const OmpAnalyzer& a) {
  OmpProfile p;
  a.Build([](uint32_t id) { return id == 7 ? std::string("main+0x10") : std::string(); },
          [](uint32_t loc) { return "t" + std::to_string(loc); },
          [](uint32_t) { return std::pair<uint64_t, uint64_t>(UINT64_MAX, 0); }, &p);
  return p;
}

// Two regions of a two-thread team: thread 0 (master, location 1) works 10 then waits 30 at the
// barrier, thread 1 (location 2) works 40; between them the master computes alone for 100.
TEST(OmpAnalyzer, SplitsWorkWaitsAndImbalance) {
  OmpAnalyzer a;
  a.Consume(1, 5, 5, Ev(0, Kind::kOmpThread, {1, 1}));
  a.Consume(2, 5, 6, Ev(0, Kind::kOmpThread, {2, 1}));
  for (uint64_t base : {100u, 300u}) {
    uint64_t region = base == 100 ? 1 : 2;
    a.Consume(1, 5, 5, Ev(base + 40, Kind::kOmpSyncWait, {region, 3, base + 10}));
    a.Consume(2, 5, 6, Ev(base + 40, Kind::kOmpSyncWait, {region, 3, base + 40}));
    a.Consume(1, 5, 5, Ev(base + 41, Kind::kOmpImplicitTask, {region, 0, 2, base}));
    a.Consume(2, 5, 6, Ev(base + 41, Kind::kOmpImplicitTask, {region, 1, 2, base}));
    a.Consume(1, 5, 5, Ev(base + 42, Kind::kOmpParallel, {region, 2, 7, base}));
  }
  // A lock wait outside any region counts for the master, not for a region.
  a.Consume(1, 5, 5, Ev(400, Kind::kOmpMutexWait, {1, 9, 395}));
  a.Consume(2, 5, 6, Ev(500, Kind::kOmpThread, {0, 2}));
  a.Consume(1, 5, 5, Ev(500, Kind::kOmpThread, {0, 2}));
  OmpProfile p = Build(a);
  ASSERT_EQ(p.threads.size(), 2u);
  const OmpThreadResult& m = p.threads[0];
  const OmpThreadResult& w = p.threads[1];
  EXPECT_TRUE(m.master);
  EXPECT_EQ(m.regions, 2u);
  EXPECT_EQ(m.region_ns, 82u);
  EXPECT_EQ(m.barrier_ns, 60u);
  EXPECT_EQ(m.work_ns, 22u);
  EXPECT_EQ(m.lock_ns, 5u);
  EXPECT_EQ(m.serial_ns, 500u - 82u);
  EXPECT_FALSE(w.master);
  EXPECT_EQ(w.work_ns, 82u);
  EXPECT_EQ(w.idle_ns, 500u - 82u);
  ASSERT_EQ(p.regions.size(), 1u);
  const OmpRegionResult& r = p.regions[0];
  EXPECT_EQ(r.construct, "main+0x10");
  EXPECT_EQ(r.instances, 2u);
  EXPECT_EQ(r.team_size, 2u);
  EXPECT_EQ(r.wall_ns, 84u);
  EXPECT_EQ(r.max_work_ns, 82u);
  EXPECT_DOUBLE_EQ(r.imbalance, 82.0 / 52.0);
  ASSERT_EQ(r.thread_barrier_ns.size(), 2u);
  EXPECT_EQ(r.thread_barrier_ns[0], 60u);
  EXPECT_EQ(r.thread_barrier_ns[1], 0u);
  EXPECT_EQ(r.thread_barrier_implicit_ns[0], 0u);
}

// Tasks run inside a barrier wait are work; a region still open at the end is counted as it is.
TEST(OmpAnalyzer, TasksInBarriersAndOpenRegions) {
  OmpAnalyzer a;
  a.Consume(1, 5, 5, Ev(30, Kind::kOmpTask, {1, 20}));
  a.Consume(1, 5, 5, Ev(40, Kind::kOmpSyncWait, {1, 9, 10}));
  a.Consume(1, 5, 5, Ev(41, Kind::kOmpImplicitTask, {1, 0, 2, 0}));
  OmpProfile p = Build(a);
  ASSERT_EQ(p.threads.size(), 1u);
  EXPECT_EQ(p.threads[0].barrier_ns, 20u);
  EXPECT_EQ(p.threads[0].barrier_implicit_ns, 20u);
  EXPECT_EQ(p.threads[0].task_ns, 10u);
  EXPECT_EQ(p.threads[0].work_ns, 21u);
  ASSERT_EQ(p.regions.size(), 1u);
  EXPECT_EQ(p.regions[0].construct, "?");
  EXPECT_EQ(p.regions[0].team_size, 2u);  // the member that never reported counts as zero work
  EXPECT_DOUBLE_EQ(p.regions[0].imbalance, 2.0);
}

// libomp reports a worker's closing barrier and implicit task end when the next region starts:
// both are clipped to the region's end.
TEST(OmpAnalyzer, LateWorkerReportsEndWithTheRegion) {
  OmpAnalyzer a;
  a.Consume(1, 5, 5, Ev(10, Kind::kOmpImplicitTask, {1, 0, 2, 0}));
  a.Consume(1, 5, 5, Ev(11, Kind::kOmpParallel, {1, 2, 7, 0}));
  a.Consume(2, 5, 6, Ev(100, Kind::kOmpSyncWait, {1, 9, 5}));
  a.Consume(2, 5, 6, Ev(100, Kind::kOmpImplicitTask, {1, 1, 2, 0}));
  OmpProfile p = Build(a);
  ASSERT_EQ(p.threads.size(), 2u);
  EXPECT_EQ(p.threads[1].region_ns, 11u);
  EXPECT_EQ(p.threads[1].barrier_ns, 6u);
  EXPECT_EQ(p.threads[1].work_ns, 5u);
  EXPECT_EQ(p.threads[1].idle_ns, 100u - 11u);
  ASSERT_EQ(p.regions.size(), 1u);
  EXPECT_EQ(p.regions[0].instances, 1u);
  EXPECT_DOUBLE_EQ(p.regions[0].imbalance, 10.0 / 7.5);
}

// A window that starts inside a region (--from): its spans count from the window's start.
TEST(OmpAnalyzer, SpansAreClippedToTheWindowStart) {
  OmpAnalyzer a;
  a.SetWindowStart(50);
  a.Consume(1, 5, 5, Ev(80, Kind::kOmpSyncWait, {1, 3, 40}));
  a.Consume(1, 5, 5, Ev(100, Kind::kOmpImplicitTask, {1, 0, 1, 0}));
  a.Consume(1, 5, 5, Ev(101, Kind::kOmpParallel, {1, 1, 7, 0}));
  OmpProfile p = Build(a);
  ASSERT_EQ(p.threads.size(), 1u);
  EXPECT_EQ(p.threads[0].region_ns, 50u);
  EXPECT_EQ(p.threads[0].barrier_ns, 30u);
  EXPECT_EQ(p.threads[0].work_ns, 20u);
  ASSERT_EQ(p.regions.size(), 1u);
  EXPECT_EQ(p.regions[0].wall_ns, 51u);
}

// A team of one writes one OmpSoloRegion per region: booked as the region and its only implicit
// task, with the waits inside it, the same as the three events it stands for.
TEST(OmpAnalyzer, SoloRegionIsRegionAndImplicitTask) {
  OmpAnalyzer solo, full;
  for (uint64_t base : {100u, 300u}) {
    uint64_t region = base == 100 ? 1 : 2;
    for (OmpAnalyzer* a : {&solo, &full})
      a->Consume(1, 5, 5, Ev(base + 20, Kind::kOmpMutexWait, {1, 9, base + 5}));
    solo.Consume(1, 5, 5, Ev(base + 50, Kind::kOmpSoloRegion, {region, 7, base}));
    full.Consume(1, 5, 5, Ev(base + 50, Kind::kOmpImplicitTask, {region, 0, 1, base}));
    full.Consume(1, 5, 5, Ev(base + 50, Kind::kOmpParallel, {region, 1, 7, base}));
  }
  solo.Consume(1, 5, 5, Ev(600, Kind::kOmpThread, {0, 2}));
  full.Consume(1, 5, 5, Ev(600, Kind::kOmpThread, {0, 2}));
  OmpProfile s = Build(solo), f = Build(full);
  ASSERT_EQ(s.threads.size(), 1u);
  ASSERT_EQ(f.threads.size(), 1u);
  const OmpThreadResult& t = s.threads[0];
  EXPECT_TRUE(t.master);
  EXPECT_EQ(t.regions, 2u);
  EXPECT_EQ(t.region_ns, 100u);
  EXPECT_EQ(t.lock_ns, 30u);
  EXPECT_EQ(t.work_ns, 70u);
  EXPECT_EQ(t.barrier_ns, 0u);
  EXPECT_EQ(t.serial_ns, (600u - 100u) - 100u);  // its span from its first region
  EXPECT_EQ(t.work_ns, f.threads[0].work_ns);
  EXPECT_EQ(t.serial_ns, f.threads[0].serial_ns);
  ASSERT_EQ(s.regions.size(), 1u);
  const OmpRegionResult& r = s.regions[0];
  EXPECT_EQ(r.construct, "main+0x10");
  EXPECT_EQ(r.instances, 2u);
  EXPECT_EQ(r.team_size, 1u);
  EXPECT_EQ(r.wall_ns, 100u);
  EXPECT_DOUBLE_EQ(r.imbalance, 1.0);
  EXPECT_EQ(r.lost_ns, 0u);
  EXPECT_EQ(r.wall_ns, f.regions[0].wall_ns);
  EXPECT_EQ(r.max_work_ns, f.regions[0].max_work_ns);
}

}  // namespace
}  // namespace parmon::analysis
