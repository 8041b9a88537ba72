// Golden tests of the report's MPI time (issue 11) on small traces whose answer is known by
// construction: time inside MPI calls is communication whatever the sampler saw the thread do
// there (sleeping, lock waits, polling), MPI_Init and MPI_Finalize are start-up and shut-down in
// no state, and periodic mode (MpiStats/MpiPeerStats) gives the same counts, bytes, links and
// MPI time as trace mode.
#include <gtest/gtest.h>

#include <string>

#include "analysis/engine.h"
#include "model/session.h"
#include "support/e2e.h"
#include "trace_builder.h"

namespace parmon::testing {
namespace {

using analysis::State;
using format::Kind;
using format::Source;
using format::StringCategory;

constexpr uint64_t kUs = 1000;
constexpr uint32_t kSend = 1, kRecv = 2, kInit = 4, kFinalize = 5;

// Rank 0's sampler intervals (1 ms each, ending at 1..11 ms), per state in ThreadStates order
// (running, runnable, comm, lock, timer, io, stopped, other): it sleeps inside MPI_Init (0-2 ms),
// computes 2-5 ms, is in MPI_Recv 5-9 ms (where Open MPI takes a lock, sleeps and polls),
// computes 9-10 ms and sleeps inside MPI_Finalize (10-11 ms).
void Samples(TraceBuilder& b) {
  const std::vector<std::vector<uint64_t>> kSamples = {{0, 0, 0, 0, kMs},
                                                       {0, 0, 0, 0, kMs},
                                                       {kMs},
                                                       {kMs},
                                                       {kMs},
                                                       {500 * kUs, 0, 0, 500 * kUs},
                                                       {0, 0, 0, 0, kMs},
                                                       {600 * kUs, 400 * kUs},
                                                       {0, 0, 0, 0, kMs},
                                                       {kMs},
                                                       {0, 0, 0, 0, kMs}};
  for (size_t i = 0; i < kSamples.size(); ++i) {
    std::vector<uint64_t> a = kSamples[i];
    a.resize(8, 0);
    b.Ev(1, (i + 1) * kMs, Kind::kThreadStates, a, "", Source::kSampler);
  }
}

void Common(TraceBuilder& b, const char* mode) {
  b.Session({{"command", "mpi-time 2"},
             {"host", "test"},
             {"start_ts", std::to_string(kT0)},
             {"cpus", "2"},
             {"mode", mode}});
  b.Process(100, 1, "mpi-time");
  b.Process(200, 1, "mpi-time");
  b.Thread(1, 100, 100, "mpi-time");
  b.Thread(2, 200, 200, "mpi-time");
  b.String(kSend, StringCategory::kFunction, "MPI_Send");
  b.String(kRecv, StringCategory::kFunction, "MPI_Recv");
  b.String(kInit, StringCategory::kFunction, "MPI_Init");
  b.String(kFinalize, StringCategory::kFunction, "MPI_Finalize");
  b.Ev(1, 0, Kind::kThreadBegin);
  b.Ev(2, 0, Kind::kThreadBegin);
  Samples(b);
}

void BuildTrace(const std::string& path) {
  TraceBuilder b(path);
  Common(b, "trace");
  b.Ev(1, 0, Kind::kMpiEnter, {kInit});
  b.Ev(1, 2 * kMs, Kind::kMpiInit, {0, 2, 0});
  b.Ev(1, 2 * kMs, Kind::kMpiLeave, {kInit});
  b.Ev(1, 5 * kMs, Kind::kMpiEnter, {kRecv});
  b.Ev(1, 9 * kMs, Kind::kMpiRecv, {1, 3, 1, 100, 0, TraceBuilder::At(5 * kMs)});
  b.Ev(1, 9 * kMs, Kind::kMpiLeave, {kRecv});
  b.Ev(1, 10 * kMs, Kind::kMpiEnter, {kFinalize});
  b.Ev(1, 11 * kMs, Kind::kMpiLeave, {kFinalize});
  b.Ev(2, 0, Kind::kMpiEnter, {kInit});
  b.Ev(2, 1 * kMs, Kind::kMpiInit, {1, 2, 0});
  b.Ev(2, 1 * kMs, Kind::kMpiLeave, {kInit});
  b.Ev(2, 9 * kMs, Kind::kMpiEnter, {kSend});
  b.Ev(2, 9 * kMs, Kind::kMpiSend, {0, 3, 1, 100, 0});
  b.Ev(2, 9100 * kUs, Kind::kMpiLeave, {kSend});
  b.Ev(2, 10 * kMs, Kind::kMpiEnter, {kFinalize});
  b.Ev(2, 11 * kMs, Kind::kMpiLeave, {kFinalize});
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + 11 * kMs)}, {"exit_code", "0"}}));
}

// The same run as periodic mode writes it: per-flush function totals and per-peer sends.
void BuildPeriodic(const std::string& path) {
  TraceBuilder b(path);
  Common(b, "periodic");
  b.Ev(1, 2 * kMs, Kind::kMpiInit, {0, 2, 0});
  b.Ev(1, 9 * kMs, Kind::kMpiStats, {kInit, 1, 2 * kMs, 0});
  b.Ev(1, 9 * kMs, Kind::kMpiStats, {kRecv, 1, 4 * kMs, 100});
  b.Ev(1, 11 * kMs, Kind::kMpiStats, {kFinalize, 1, kMs, 0});
  b.Ev(2, 1 * kMs, Kind::kMpiInit, {1, 2, 0});
  b.Ev(2, 9100 * kUs, Kind::kMpiStats, {kInit, 1, kMs, 0});
  b.Ev(2, 9100 * kUs, Kind::kMpiStats, {kSend, 1, 100 * kUs, 100});
  b.Ev(2, 9100 * kUs, Kind::kMpiPeerStats, {0, 1, 100});
  b.Ev(2, 11 * kMs, Kind::kMpiStats, {kFinalize, 1, kMs, 0});
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + 11 * kMs)}, {"exit_code", "0"}}));
}

analysis::Results Analyze(const std::string& path) {
  auto s = model::Session::Open(path, {});
  EXPECT_TRUE(s.ok()) << s.status().message();
  analysis::Options o;
  o.interval_ns = kMs;
  auto r = analysis::Analyze(**s, o);
  EXPECT_TRUE(r.ok());
  return std::move(*r);
}

uint64_t St(const analysis::LocationResult& l, State s) {
  return l.states[static_cast<int>(s)];
}

// What both modes must agree on: counts, bytes, links, MPI time, start-up and shut-down apart,
// no sleeping or lock time left on rank 0, no finding about either.
void ExpectCommon(const analysis::Results& r) {
  ASSERT_GE(r.locations.size(), 2u);
  const auto& r0 = r.locations[0];
  const auto& r1 = r.locations[1];
  ASSERT_EQ(r0.label, "rank 0");
  ASSERT_EQ(r1.label, "rank 1");
  EXPECT_EQ(r0.mpi_ns, 4 * kMs);
  EXPECT_EQ(r0.mpi_startup_ns, 2 * kMs);
  EXPECT_EQ(r0.mpi_shutdown_ns, kMs);
  EXPECT_EQ(r1.mpi_ns, 100 * kUs);
  EXPECT_EQ(r1.mpi_startup_ns, kMs);
  EXPECT_EQ(r1.mpi_shutdown_ns, kMs);
  EXPECT_EQ(r0.mpi_calls, 3u);
  EXPECT_EQ(r0.messages_received, 1u);
  EXPECT_EQ(r0.bytes_received, 100u);
  EXPECT_EQ(r1.messages_sent, 1u);
  EXPECT_EQ(r1.bytes_sent, 100u);
  ASSERT_EQ(r.links.size(), 1u);
  EXPECT_EQ(r.links[0].from, 1);
  EXPECT_EQ(r.links[0].to, 0);
  EXPECT_EQ(r.links[0].messages, 1u);
  EXPECT_EQ(r.links[0].bytes, 100u);
  // Rank 0: 11 ms, of which 3 ms start-up and shut-down (in no state) and 4 ms in MPI_Recv.
  EXPECT_EQ(r0.state_source, "sampled");
  EXPECT_NEAR(static_cast<double>(analysis::Sum(r0.states)), 8e6, 2);
  EXPECT_NEAR(static_cast<double>(St(r0, State::kCommWait)), 4e6, 2);
  EXPECT_EQ(St(r0, State::kTimerWait), 0u);
  EXPECT_EQ(St(r0, State::kLockWait), 0u);
  for (const auto& f : r.findings) {
    EXPECT_NE(f.id, "timer-wait") << f.text;
    EXPECT_NE(f.id, "lock-wait") << f.text;
  }
  // The MPI function profile: time per function and its spread over the two ranks.
  ASSERT_EQ(r.mpi.ranks, 2u);
  EXPECT_EQ(r.mpi.mpi_ns, 4 * kMs + 100 * kUs);
  EXPECT_EQ(r.mpi.most_rank, 0);
  ASSERT_EQ(r.mpi.functions.size(), 2u);
  EXPECT_EQ(r.mpi.functions[0].name, "MPI_Recv");
  EXPECT_EQ(r.mpi.functions[0].calls, 1u);
  EXPECT_EQ(r.mpi.functions[0].max_rank_ns, 4 * kMs);
  EXPECT_EQ(r.mpi.functions[0].min_rank_ns, 0u);
  EXPECT_DOUBLE_EQ(r.mpi.functions[0].mean_rank_ns, 2e6);
  EXPECT_EQ(r.mpi.functions[0].max_rank, 0);
}

TEST(MpiTimeGolden, TraceModeMovesMpiTimeOutOfSleepsAndLocks) {
  TempDir dir;
  BuildTrace(dir.File("t.ptrace"));
  analysis::Results r = Analyze(dir.File("t.ptrace"));
  ExpectCommon(r);
  const auto& r0 = r.locations[0];
  // Exact per sampler interval: the computing 2-5 and 9-10 ms are running, nothing queued.
  EXPECT_EQ(St(r0, State::kRunning), 4 * kMs);
  EXPECT_EQ(St(r0, State::kRunnable), 0u);
  // What the kernel saw inside MPI_Recv stays as detail.
  EXPECT_EQ(r0.mpi_kernel_states[static_cast<int>(State::kTimerWait)], 2 * kMs);
  EXPECT_EQ(r0.mpi_kernel_states[static_cast<int>(State::kLockWait)], 500 * kUs);
  EXPECT_EQ(r0.mpi_kernel_states[static_cast<int>(State::kRunning)], 1100 * kUs);
  EXPECT_EQ(r0.mpi_kernel_states[static_cast<int>(State::kRunnable)], 400 * kUs);
}

TEST(MpiTimeGolden, PeriodicModeHasTheSameCountsLinksAndMpiTime) {
  TempDir dir;
  BuildPeriodic(dir.File("p.ptrace"));
  analysis::Results r = Analyze(dir.File("p.ptrace"));
  ExpectCommon(r);
  // A flush's time is spread over 2-9 ms: the waits there go first, then running and queued in
  // proportion (4.1 : 0.4), so 0.13 ms of the computing is booked as MPI.
  const auto& r0 = r.locations[0];
  EXPECT_NEAR(static_cast<double>(St(r0, State::kRunning)), 4.1e6 - 1.5e6 * 4.1 / 4.5 + 1e6, 10);
}

}  // namespace
}  // namespace parmon::testing
