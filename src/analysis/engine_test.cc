// Engine tests on small traces built here: snapshots (a snapshot taken midway is the result of the
// prefix, and taking one changes nothing), and each analyzer on the events of its concern
// (thread states, regions, MPI point-to-point waits, collectives, POSIX channels, critical path).
#include "analysis/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "analysis/views.h"
#include "model/merge.h"
#include "model/session.h"
#include "report/trace_builder.h"

namespace parmon::analysis {
namespace {

using format::Kind;
using format::StringCategory;
using testing::kMs;
using testing::TraceBuilder;

constexpr uint64_t kUs = 1000;
constexpr uint32_t kSend = 1, kRecv = 2, kBarrier = 3, kWrite = 4, kCompute = 10, kInner = 11;

std::string TempPath(const char* name) {
  return ::testing::TempDir() + "/engine_test_" + std::to_string(getpid()) + "_" + name;
}

// Ranks 0 and 1: locations 1 and 2, processes 100 and 200, each its MpiInit at 0.
void TwoRanks(TraceBuilder& b) {
  for (uint32_t rank = 0; rank < 2; ++rank) {
    uint32_t loc = rank + 1, pid = 100 * loc;
    b.Process(pid, 1, "t");
    b.Thread(loc, pid, pid, "t");
    b.Ev(loc, 0, Kind::kMpiInit, {rank, 2, 0});
  }
}

// Two MPI ranks: a late receiver (rank 1 posts 2 ms after rank 0 sends), a late sender (rank 1
// sends 2 ms after rank 0 waits) and a barrier rank 0 enters 0.3 ms before rank 1. Rank 0 runs a
// region "compute" (0-4 ms) with "inner" (1-3 ms) nested in it.
void BuildMpi(TraceBuilder& b) {
  b.Session({{"command", "t"}, {"start_ts", std::to_string(testing::kT0)}});
  const std::pair<uint32_t, const char*> strings[] = {
      {kSend, "MPI_Send"}, {kRecv, "MPI_Recv"}, {kBarrier, "MPI_Barrier"}};
  for (const auto& [id, text] : strings)
    b.String(id, StringCategory::kFunction, text);
  b.String(kCompute, StringCategory::kRegion, "compute");
  b.String(kInner, StringCategory::kRegion, "inner");
  TwoRanks(b);
  auto call = [&](uint32_t loc, uint64_t enter_us, uint64_t leave_us, uint32_t func, Kind what,
                  std::vector<uint64_t> args) {
    b.Ev(loc, enter_us * kUs, Kind::kMpiEnter, {func});
    uint64_t at = what == Kind::kMpiRecv ? leave_us : enter_us;
    b.Ev(loc, at * kUs, what, std::move(args));
    b.Ev(loc, leave_us * kUs, Kind::kMpiLeave, {func});
  };
  // Each location's events in time order.
  b.Ev(1, 0, Kind::kRegionEnter, {kCompute});
  b.Ev(1, 1000 * kUs, Kind::kRegionEnter, {kInner});
  b.Ev(1, 3000 * kUs, Kind::kRegionLeave, {kInner});
  b.Ev(1, 4000 * kUs, Kind::kRegionLeave, {kCompute});
  call(1, 4000, 6200, kSend, Kind::kMpiSend, {1, 7, 1, 1000, 0});
  call(1, 7000, 9300, kRecv, Kind::kMpiRecv, {1, 8, 1, 500, 0, TraceBuilder::At(7000 * kUs)});
  call(1, 9500, 9900, kBarrier, Kind::kMpiCollective, {kBarrier, 1, UINT64_MAX, 0, 0, 0});
  call(2, 6000, 6200, kRecv, Kind::kMpiRecv, {0, 7, 1, 1000, 0, TraceBuilder::At(6000 * kUs)});
  call(2, 9000, 9100, kSend, Kind::kMpiSend, {0, 8, 1, 500, 0});
  call(2, 9800, 9900, kBarrier, Kind::kMpiCollective, {kBarrier, 1, UINT64_MAX, 0, 0, 0});
  for (uint32_t loc : {1u, 2u})
    b.Ev(loc, 10 * kMs, Kind::kThreadEnd);
}

// A writer thread and a reader thread of one process on a pipe; a sampled third thread.
void BuildChannels(TraceBuilder& b) {
  b.Session({{"command", "t"}, {"start_ts", std::to_string(testing::kT0)}});
  b.Process(300, 1, "t");
  b.Thread(1, 300, 301, "writer");
  b.Thread(2, 300, 302, "reader");
  b.Thread(3, 300, 303, "sampled");
  b.String(kWrite, StringCategory::kFunction, "write");
  b.Ev(1, 0, Kind::kChanInfo, {4, 1, 99, 0}, "pipe:[99]");
  b.Ev(2, 0, Kind::kChanInfo, {3, 1, 99, 0}, "pipe:[99]");
  for (uint64_t i = 0; i < 4; ++i) {
    b.Ev(1, (2 * i + 1) * kMs, Kind::kChanWrite,
         {4, 100, TraceBuilder::At((2 * i + 1) * kMs), kWrite});
    b.Ev(2, (2 * i + 1) * kMs + 500 * kUs, Kind::kChanRead,
         {3, 100, TraceBuilder::At(2 * i * kMs), 0});
  }
  b.Ev(1, 10 * kMs, Kind::kThreadEnd);
  b.Ev(2, 10 * kMs, Kind::kThreadEnd);
  // 10 ms: 6 running, 2 queued, 2 in lock waits.
  b.Ev(3, 10 * kMs, Kind::kThreadStates, {6 * kMs, 2 * kMs, 0, 2 * kMs, 0, 0, 0, 0}, "",
       format::Source::kSampler);
}

struct Trace {
  std::string path;
  std::unique_ptr<model::Session> session;
};

template <typename Build>
Trace Make(const char* name, Build build) {
  Trace t;
  t.path = TempPath(name);
  TraceBuilder b(t.path);
  build(b);
  EXPECT_TRUE(b.Finish({{"end_ts", std::to_string(testing::kT0 + 10 * kMs)}}));
  auto r = model::Session::Open(t.path);
  EXPECT_TRUE(r.ok());
  t.session = std::move(*r);
  return t;
}

// The window's events in time order (what the feed hands the engine).
std::vector<format::Event> Events(const model::Session& session,
                                  std::vector<std::string>* payloads) {
  std::vector<format::Event> out;
  model::Merge merge(session);  // every stream but the definitions
  format::Event e;
  payloads->reserve(1024);
  while (merge.Next(&e)) {
    payloads->emplace_back(e.payload);
    out.push_back(e);
  }
  for (size_t i = 0; i < out.size(); ++i)
    out[i].payload = (*payloads)[i];
  return out;
}

Options FixedIntervals() {
  Options o;
  o.interval_ns = kMs;
  return o;
}

TEST(EngineSnapshot, MidwaySnapshotIsThePrefixResult) {
  for (auto build : {&BuildMpi, &BuildChannels}) {
    Trace t = Make("snapshot", build);
    std::vector<std::string> payloads;
    std::vector<format::Event> events = Events(*t.session, &payloads);
    ASSERT_GT(events.size(), 6u);
    for (size_t cut : {size_t{3}, events.size() / 2, events.size() - 1}) {
      Engine live(*t.session, FixedIntervals());
      Engine prefix(*t.session, FixedIntervals());
      for (size_t i = 0; i < cut; ++i) {
        live.Consume(events[i]);
        prefix.Consume(events[i]);
      }
      Results snap = live.Snapshot();
      EXPECT_EQ(ToJson(snap).dump(), ToJson(prefix.Finish()).dump()) << "cut at " << cut;
      // The snapshot did not disturb the live engine: it ends as one that was never asked.
      Engine whole(*t.session, FixedIntervals());
      for (size_t i = 0; i < events.size(); ++i) {
        if (i >= cut)
          live.Consume(events[i]);
        whole.Consume(events[i]);
      }
      EXPECT_EQ(ToJson(live.Finish()).dump(), ToJson(whole.Finish()).dump()) << "cut at " << cut;
    }
  }
}

TEST(EngineSnapshot, FinishOfFedEventsEqualsRun) {
  Trace t = Make("run", &BuildMpi);
  std::vector<std::string> payloads;
  std::vector<format::Event> events = Events(*t.session, &payloads);
  Engine fed(*t.session, FixedIntervals());
  for (const auto& e : events)
    fed.Consume(e);
  Engine run(*t.session, FixedIntervals());
  EXPECT_EQ(ToJson(fed.Finish()).dump(), ToJson(run.Run()).dump());
}

const LocationResult& Loc(const Results& r, uint32_t id) {
  int i = r.LocationIndex(id);
  EXPECT_GE(i, 0);
  return r.locations[static_cast<size_t>(i)];
}

// A window that starts after MPI_Init (at 0) still knows the ranks: the MpiInit events before it
// are read for what they define (issue 11: `ranks 0`, links `rank -1 -> rank 0`).
TEST(Analyzers, WindowAfterMpiInitKeepsRanksAndLinks) {
  Trace t = Make("window", &BuildMpi);
  Options o = FixedIntervals();
  o.from_ns = 5 * kMs;
  Results r = Engine(*t.session, o).Run();
  EXPECT_EQ(r.summary.ranks, 2u);
  EXPECT_EQ(Loc(r, 1).label, "rank 0");
  EXPECT_EQ(Loc(r, 2).label, "rank 1");
  ASSERT_FALSE(r.links.empty());
  for (const auto& k : r.links) {
    EXPECT_GE(k.from, 0) << k.from_label << " -> " << k.to_label;
    EXPECT_GE(k.to, 0) << k.from_label << " -> " << k.to_label;
  }
}

// Rank 1 dies of SIGSEGV at 5 ms while rank 0 waits in MPI_Barrier (entered at 1 ms); SIGTERM
// from pid 77 ends rank 0 at 9 ms. The crash is a finding; rank 0's open barrier is MPI time up
// to its last event.
TEST(Analyzers, CrashAndThePeerLeftInMpi) {
  Trace t = Make("crash", [](TraceBuilder& b) {
    b.Session({{"command", "t"}, {"start_ts", std::to_string(testing::kT0)}});
    b.String(kBarrier, StringCategory::kFunction, "MPI_Barrier");
    TwoRanks(b);
    b.Ev(1, 1 * kMs, Kind::kMpiEnter, {kBarrier});
    b.Ev(2, 5 * kMs, Kind::kFatalSignal, {11, 1, 0});
    b.Ev(1, 9 * kMs, Kind::kFatalSignal, {15, 0, 77});
  });
  Results r = Engine(*t.session, FixedIntervals()).Run();
  ASSERT_EQ(r.deaths.size(), 2u);
  const ProcessDeath& d = r.deaths[0];
  EXPECT_EQ(d.label, "rank 1");
  EXPECT_EQ(d.pid, 200u);
  EXPECT_EQ(d.signal_name, "SIGSEGV");
  EXPECT_TRUE(d.crashed);
  ASSERT_EQ(d.others.size(), 1u);
  EXPECT_EQ(d.others[0].label, "rank 0");
  EXPECT_EQ(d.others[0].mpi_call, "MPI_Barrier");
  EXPECT_EQ(d.others[0].end_signal_name, "SIGTERM");
  EXPECT_EQ(d.others[0].until - d.ts, 4 * kMs);
  EXPECT_FALSE(r.deaths[1].crashed);
  EXPECT_EQ(r.deaths[1].sender, 77u);
  EXPECT_EQ(Loc(r, 1).mpi_ns, 8 * kMs);
  EXPECT_EQ(Loc(r, 1).states[static_cast<int>(State::kCommWait)], 8 * kMs);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].id, "crash");
  EXPECT_NE(r.findings[0].text.find("rank 1 (pid 200) crashed at"), std::string::npos)
      << r.findings[0].text;
  EXPECT_NE(r.findings[0].text.find("afterwards rank 0 waited in MPI_Barrier for"),
            std::string::npos)
      << r.findings[0].text;
  EXPECT_NE(r.findings[0].text.find("until SIGTERM ended it"), std::string::npos)
      << r.findings[0].text;
  EXPECT_EQ(r.findings[0].time_at_stake_ns, 4 * kMs);
}

TEST(Analyzers, RegionsInclusiveAndExclusive) {
  Trace t = Make("regions", &BuildMpi);
  Results r = Engine(*t.session, FixedIntervals()).Run();
  const auto& regions = Loc(r, 1).top_regions;
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[0].name, "compute");
  EXPECT_EQ(regions[0].inclusive_ns, 4 * kMs);
  EXPECT_EQ(regions[0].exclusive_ns, 2 * kMs);
  EXPECT_EQ(regions[1].name, "inner");
  EXPECT_EQ(regions[1].inclusive_ns, 2 * kMs);
}

TEST(Analyzers, MpiPointToPointWaits) {
  Trace t = Make("p2p", &BuildMpi);
  Results r = Engine(*t.session, FixedIntervals()).Run();
  EXPECT_EQ(Loc(r, 1).late_receiver_ns, 2 * kMs);
  EXPECT_EQ(Loc(r, 1).late_sender_ns, 2 * kMs);
  EXPECT_EQ(Loc(r, 1).messages_sent, 1u);
  EXPECT_EQ(Loc(r, 2).bytes_received, 1000u);
  ASSERT_EQ(r.links.size(), 2u);
  EXPECT_EQ(r.links[0].from, 0);
  EXPECT_EQ(r.links[0].to, 1);
  EXPECT_EQ(r.links[0].sender_wait_ns, 2 * kMs);
  // MPI time by family, from the generated table.
  ASSERT_FALSE(Loc(r, 1).mpi_families.empty());
  EXPECT_EQ(Loc(r, 1).mpi_families[0].family, "p2p");
}

TEST(Analyzers, CollectiveWaitAtBarrier) {
  Trace t = Make("coll", &BuildMpi);
  Results r = Engine(*t.session, FixedIntervals()).Run();
  EXPECT_EQ(Loc(r, 1).barrier_wait_ns, 300 * kUs);
  EXPECT_EQ(Loc(r, 2).barrier_wait_ns, 0u);
  bool found = false;
  for (const auto& w : r.wait_states)
    found |= w.pattern == "wait at barrier" && w.location == 1 && w.call == "MPI_Barrier";
  EXPECT_TRUE(found);
}

TEST(Analyzers, CriticalPathFollowsMessages) {
  Trace t = Make("cp", &BuildMpi);
  Results r = Engine(*t.session, FixedIntervals()).Run();
  EXPECT_GT(r.critical_path.length_ns, 0u);
  EXPECT_LE(r.critical_path.length_ns, r.critical_path.wall_ns);
  uint64_t sum = 0;
  for (const auto& [label, ns] : r.critical_path.shares)
    sum += ns;
  EXPECT_EQ(sum, r.critical_path.length_ns);
}

// A shell that computes 0.5 ms, forks a child and waits for it in wait4 (no recorded call: the
// sampler sees it in other waits), then runs 0.2 ms after the child's exit. The child computes
// 6 ms of its 7.9 ms (queued the rest). The path: the shell's first 0.5 ms, into the child at the
// fork, back to the shell at the exit, and its last 0.2 ms; its wait is on no path.
// A parent process (pid 100, location 1) and the child it forks (pid 200, location 2).
void ParentAndChild(TraceBuilder& b, const char* parent, const char* child) {
  b.Session({{"command", parent}, {"start_ts", std::to_string(testing::kT0)}});
  b.Process(100, 1, parent);
  b.Process(200, 100, child);
  b.Thread(1, 100, 100, parent);
  b.Thread(2, 200, 200, child);
}
constexpr auto kSched = format::Source::kSched, kSampler = format::Source::kSampler;

void BuildForkWait(TraceBuilder& b) {
  ParentAndChild(b, "sh", "child");
  const auto sched = kSched, sampler = kSampler;
  b.Ev(1, 0, Kind::kTaskStart, {0}, "", sched);
  b.Ev(1, kMs, Kind::kThreadStates, {500 * kUs, 0, 0, 0, 0, 0, 0, 500 * kUs}, "", sampler);
  b.Ev(2, 1100 * kUs, Kind::kTaskStart, {100}, "", sched);
  b.Ev(2, 8900 * kUs, Kind::kThreadStates, {6 * kMs, 1800 * kUs, 0, 0, 0, 0, 0, 0}, "", sampler);
  b.Ev(2, 9 * kMs, Kind::kTaskExit, {0}, "", sched);
  b.Ev(1, 9950 * kUs, Kind::kThreadStates, {200 * kUs, 0, 0, 0, 0, 0, 0, 8750 * kUs}, "", sampler);
  b.Ev(1, 10 * kMs, Kind::kTaskExit, {0}, "", sched);
}

TEST(Analyzers, CriticalPathGoesThroughTheChildNotTheWait) {
  Trace t = Make("fork", &BuildForkWait);
  Results r = Engine(*t.session, FixedIntervals()).Run();
  EXPECT_EQ(r.critical_path.length_ns, 6700 * kUs);
  ASSERT_EQ(r.critical_path.shares.size(), 2u);
  EXPECT_EQ(r.critical_path.shares[0].first, "child (200)");
  EXPECT_EQ(r.critical_path.shares[0].second, 6 * kMs);
  EXPECT_EQ(r.critical_path.shares[1].first, "sh (100)");
  EXPECT_EQ(r.critical_path.shares[1].second, 700 * kUs);  // what it ran, none of its wait
}

// The same with context-switch records, which time each stretch exactly: the parent runs
// 0-0.5 ms (forking the child at 0.4 ms) and 5.2-5.5 ms; the child 1-2 ms and 3-5 ms, then
// exits with no switch-out after it (the exit is its last), and the sampler's last sample of it
// comes at 9 ms: the 4 ms between are no running of it.
void BuildSwitchedFork(TraceBuilder& b) {
  ParentAndChild(b, "p", "c");
  const auto sched = kSched, sampler = kSampler;
  b.Ev(1, 0, Kind::kSwitchIn, {0}, "", sched);
  b.Ev(2, 400 * kUs, Kind::kTaskStart, {100}, "", sched);
  b.Ev(1, 500 * kUs, Kind::kSwitchOut, {0, 0}, "", sched);
  b.Ev(2, 1 * kMs, Kind::kSwitchIn, {1}, "", sched);
  b.Ev(2, 2 * kMs, Kind::kSwitchOut, {1, 1}, "", sched);
  b.Ev(2, 3 * kMs, Kind::kSwitchIn, {1}, "", sched);
  b.Ev(2, 5 * kMs, Kind::kTaskExit, {0}, "", sched);
  b.Ev(1, 5200 * kUs, Kind::kSwitchIn, {0}, "", sched);
  b.Ev(1, 5500 * kUs, Kind::kTaskExit, {0}, "", sched);
  b.Ev(2, 9 * kMs, Kind::kThreadStates, {3 * kMs, 1 * kMs, 0, 0, 0, 0, 0, 4600 * kUs}, "", sampler);
}

// A write to a pipe nobody in the session reads, 1-9 ms, during which the writer was preempted
// 2-5 ms (switched out runnable) and blocked 6-7 ms (switched out asleep): the link's time is the
// call's 8 ms less the 3 ms it was queued for a CPU, which no reader caused, and of it only the
// 1 ms blocked waits for the reader (the 4 ms it ran copied).
void BuildPreemptedWrite(TraceBuilder& b) {
  b.Session({{"command", "w"}, {"start_ts", std::to_string(testing::kT0)}});
  b.Process(400, 1, "w");
  b.Thread(1, 400, 400, "w");
  b.Ev(1, 0, Kind::kChanInfo, {1, 1, 77, 0}, "pipe:[77]");
  const auto sched = kSched;
  b.Ev(1, 0, Kind::kSwitchIn, {0}, "", sched);
  b.Ev(1, 2 * kMs, Kind::kSwitchOut, {0, 1}, "", sched);  // preempted
  b.Ev(1, 5 * kMs, Kind::kSwitchIn, {0}, "", sched);
  b.Ev(1, 6 * kMs, Kind::kSwitchOut, {0, 0}, "", sched);  // blocked
  b.Ev(1, 7 * kMs, Kind::kSwitchIn, {0}, "", sched);
  b.Ev(1, 9 * kMs, Kind::kChanWrite, {1, 20, TraceBuilder::At(1 * kMs), 0});
}

TEST(Analyzers, TimePreemptedOrRunningInAChannelCallIsNotWaitingForThePeer) {
  Trace t = Make("preempted_write", &BuildPreemptedWrite);
  Results r = Engine(*t.session, FixedIntervals()).Run();
  ASSERT_EQ(r.links.size(), 1u);
  EXPECT_EQ(r.links[0].kind, "channel");
  EXPECT_EQ(r.links[0].to_label, "pipe:[77]");  // no reader in the session
  EXPECT_EQ(r.links[0].sender_wait_ns, 1 * kMs);
  EXPECT_EQ(r.links[0].wait_ns, 1 * kMs);
  EXPECT_EQ(r.links[0].time_ns, 5 * kMs);
}

// The switch-record budget stopped the records at 2 ms (SwitchesStopped) while the thread was on
// a CPU since 0; the sampler then booked it 3 ms running of 10 (the records' 2 ms and 1 ms after).
// A write to a pipe from 4 to 9 ms comes after the stop: without records all of it waits.
void BuildStoppedRecords(TraceBuilder& b, bool stopped) {
  b.Session({{"command", "w"}, {"start_ts", std::to_string(testing::kT0)}});
  b.Process(400, 1, "w");
  b.Thread(1, 400, 400, "w");
  if (stopped)
    b.SwitchesStopped(2 * kMs, 400, {1, 1, 200 * kMs, 200 * kMs, 450, 50'000});
  b.Ev(1, 0, Kind::kChanInfo, {1, 1, 77, 0}, "pipe:[77]");
  b.Ev(1, 0, Kind::kSwitchIn, {0}, "", kSched);
  b.Ev(1, 9 * kMs, Kind::kChanWrite, {1, 20, TraceBuilder::At(4 * kMs), 0});
  b.Ev(1, 10 * kMs, Kind::kThreadStates, {3 * kMs, 0, 0, 0, 0, 0, 0, 7 * kMs}, "", kSampler);
  b.Ev(1, 10 * kMs, Kind::kThreadEnd);
}

TEST(Analyzers, AfterTheSwitchRecordsStopTheSamplesTimeTheThread) {
  Trace t = Make("stopped", [](TraceBuilder& b) { BuildStoppedRecords(b, true); });
  Results r = Engine(*t.session, FixedIntervals()).Run();
  // The path: 2 ms by the running clock up to the stop, then the 1 ms the samples add.
  EXPECT_EQ(r.critical_path.length_ns, 3 * kMs);
  ASSERT_EQ(r.links.size(), 1u);
  EXPECT_EQ(r.links[0].wait_ns, 5 * kMs);
  ASSERT_EQ(r.summary.switch_stops.size(), 1u);
  EXPECT_EQ(r.summary.switch_stops[0].ts, TraceBuilder::At(2 * kMs));
  EXPECT_EQ(r.summary.switch_stops[0].records, 1u);
  EXPECT_DOUBLE_EQ(r.summary.switch_stops[0].budget, 0.05);
  EXPECT_NE(RenderText(r).find("context-switch records stopped at 2.00 ms after 1 records"),
            std::string::npos)
      << RenderText(r);
  // Without the stop the records say it never left the CPU: 5 ms of path (all but the write),
  // more than it ran, and a write that ran all along waited for nothing.
  Trace all = Make("unstopped", [](TraceBuilder& b) { BuildStoppedRecords(b, false); });
  Results u = Engine(*all.session, FixedIntervals()).Run();
  EXPECT_EQ(u.critical_path.length_ns, 5 * kMs);
  ASSERT_EQ(u.links.size(), 1u);
  EXPECT_EQ(u.links[0].wait_ns, 0u);
}

TEST(Analyzers, CriticalPathFromSwitchRecordsEndsAtTheExit) {
  Trace t = Make("switched", &BuildSwitchedFork);
  Results r = Engine(*t.session, FixedIntervals()).Run();
  EXPECT_EQ(r.critical_path.length_ns, 3700 * kUs);
  ASSERT_EQ(r.critical_path.shares.size(), 2u);
  EXPECT_EQ(r.critical_path.shares[0].first, "c (200)");
  EXPECT_EQ(r.critical_path.shares[0].second, 3 * kMs);
  // Before the fork and after the exit; its 0.1 ms between the fork and blocking is on no path.
  EXPECT_EQ(r.critical_path.shares[1].second, 700 * kUs);
}

TEST(Analyzers, ChannelLinkBetweenThreads) {
  Trace t = Make("chan", &BuildChannels);
  Results r = Engine(*t.session, FixedIntervals()).Run();
  ASSERT_EQ(r.links.size(), 1u);
  const LinkResult& k = r.links[0];
  EXPECT_EQ(k.kind, "channel");
  EXPECT_EQ(k.from, 1);
  EXPECT_EQ(k.to, 2);
  EXPECT_EQ(k.bytes, 400u);
  // Each read blocked 1.5 ms for the writer.
  EXPECT_EQ(k.receiver_wait_ns, 4 * 1500 * kUs);
  EXPECT_EQ(Loc(r, 2).states[static_cast<int>(State::kCommWait)], 4 * 1500 * kUs);
}

TEST(Analyzers, SampledThreadStatesAndIntervals) {
  Trace t = Make("states", &BuildChannels);
  Results r = Engine(*t.session, FixedIntervals()).Run();
  const LocationResult& l = Loc(r, 3);
  EXPECT_EQ(l.state_source, "sampled");
  EXPECT_EQ(l.states[static_cast<int>(State::kRunning)], 6 * kMs);
  EXPECT_EQ(l.states[static_cast<int>(State::kRunnable)], 2 * kMs);
  EXPECT_EQ(l.states[static_cast<int>(State::kLockWait)], 2 * kMs);
  // Spread evenly over the ten 1 ms intervals.
  int li = r.LocationIndex(3);
  ASSERT_EQ(r.intervals.count, 10u);
  for (size_t i = 0; i < 10; ++i)
    EXPECT_EQ(r.intervals.location_states[li][i][static_cast<int>(State::kRunning)], 600 * kUs);
}

// A thread spins 3 ms on a busy spinlock (SyncWait type 9, 2-5 ms): the sampler saw it running
// all 10 ms; the report books the 3 ms as lock wait, in total and in the intervals it covers.
void BuildSpin(TraceBuilder& b) {
  b.Process(400, 1, "s");
  b.Thread(1, 400, 401, "spinner");
  b.Ev(1, 0, Kind::kThreadBegin);
  b.Ev(1, 5 * kMs, Kind::kSyncWait, {0x1000, 9, TraceBuilder::At(2 * kMs), 0});
  b.Ev(1, 10 * kMs, Kind::kThreadEnd);
  b.Ev(1, 10 * kMs, Kind::kThreadStates, {10 * kMs, 0, 0, 0, 0, 0, 0, 0}, "",
       format::Source::kSampler);
}

TEST(Analyzers, SpinlockWaitIsLockWaitNotRunning) {
  Trace t = Make("spin", &BuildSpin);
  Results r = Engine(*t.session, FixedIntervals()).Run();
  const LocationResult& l = Loc(r, 1);
  EXPECT_EQ(l.state_source, "sampled");
  EXPECT_EQ(l.states[static_cast<int>(State::kRunning)], 7 * kMs);
  EXPECT_EQ(l.states[static_cast<int>(State::kLockWait)], 3 * kMs);
  EXPECT_EQ(l.cpu_ns, 10 * kMs) << "the CPU it used is still its CPU time";
  int li = r.LocationIndex(1);
  ASSERT_EQ(r.intervals.count, 10u);
  for (size_t i = 0; i < 10; ++i) {
    const bool spinning = i >= 2 && i < 5;
    EXPECT_EQ(r.intervals.location_states[li][i][static_cast<int>(State::kLockWait)],
              spinning ? kMs : 0)
        << i;
    EXPECT_EQ(r.intervals.location_states[li][i][static_cast<int>(State::kRunning)],
              spinning ? 0 : kMs)
        << i;
  }
}

}  // namespace
}  // namespace parmon::analysis

namespace parmon::analysis {
namespace {

// A growing engine (the collector's live analysis) fed event by event gives, at any cut and at
// the end, exactly the report of the trace cut there: its fine intervals add up into the
// report's intervals.
TEST(EngineGrowing, FedLiveEqualsThePostMortemReportAtEveryCut) {
  for (auto build : {&BuildMpi, &BuildChannels}) {
    Trace t = Make("growing", build);
    const model::Session& s = *t.session;
    Options o;
    o.growing = true;
    Engine live(s, o);
    model::MergeFilter f;
    f.from_ts = live.window().first;
    model::Merge merge(s, std::move(f));
    for (uint64_t cut_ms : {1u, 3u, 7u, 10u}) {
      const uint64_t cut = s.start() + cut_ms * kMs;
      format::Event e;
      model::StreamIndex stream = 0;
      while (merge.Next(&e, cut, &stream))
        live.ConsumeLive(e, stream);
      Options post;
      post.to_ns = cut_ms * kMs;
      auto want = Analyze(s, post);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(ToJson(live.SnapshotUntil(std::min(cut, s.end()))).dump(1), ToJson(*want).dump(1))
          << cut_ms << " ms";
    }
    auto all = Analyze(s, {});
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(ToJson(live.SnapshotUntil(s.end())).dump(1), ToJson(*all).dump(1));
  }
}

}  // namespace
}  // namespace parmon::analysis
