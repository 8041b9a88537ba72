// End-to-end tests of MPI monitoring: bundled MPI programs (tests/comm/programs) run under
// `parmon record -- mpirun`, and the recorded messages, bytes per (sender, receiver) pair and
// collective volumes must equal what each program reports it did.
#include <gtest/gtest.h>

#include <unistd.h>

#include <sstream>

#include "comm/comm_trace.h"
#include "support/e2e.h"

namespace parmon::testing {
namespace {

std::vector<std::string> Mpirun(int ranks) {
  return {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks)};
}

struct Expected {
  std::map<std::pair<int64_t, int64_t>, std::pair<uint64_t, uint64_t>> pairs;
  std::vector<MpiCollectiveCall> collectives;
};

Expected ParseProgramOutput(const std::string& out) {
  Expected e;
  std::istringstream in(out);
  std::string word;
  while (in >> word) {
    if (word == "sent") {
      int64_t from, to;
      uint64_t n, bytes;
      in >> from >> to >> n >> bytes;
      e.pairs[{from, to}] = {n, bytes};
    } else if (word == "coll") {
      MpiCollectiveCall c;
      in >> c.rank >> c.func >> c.sent >> c.recv;
      e.collectives.push_back(c);
    }
  }
  return e;
}

struct Recorded {
  RunResult run;
  CommTrace trace;
};

Recorded RecordMpi(const TempDir& dir,
                   const std::string& program,
                   const std::string& pattern,
                   int ranks) {
  std::vector<std::string> args = {"record", "-q", "-o", dir.File("run.ptrace"), "--"};
  for (const auto& a : Mpirun(ranks))
    args.push_back(a);
  args.push_back(BinDir() + "/" + program);
  args.push_back(pattern);
  Recorded r;
  r.run = Parmon(args, 90);
  r.trace = LoadCommTrace(dir.File("run.ptrace"));
  return r;
}

void CheckMessages(const std::string& program,
                   const std::string& pattern,
                   int ranks,
                   bool expect_clean_exit = true) {
  TempDir dir;
  Recorded r = RecordMpi(dir, program, pattern, ranks);
  if (expect_clean_exit) {
    ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  }
  ASSERT_TRUE(r.trace.error.empty()) << r.trace.error;
  Expected want = ParseProgramOutput(r.run.out);
  ASSERT_FALSE(want.pairs.empty())
      << "the program reported no messages: " << r.run.out << r.run.err;
  EXPECT_EQ(r.trace.rank_of_pid.size(), static_cast<size_t>(ranks));
  Matching m = MatchMessages(r.trace);
  for (const auto& p : m.problems)
    ADD_FAILURE() << p;
  EXPECT_EQ(m.pairs, want.pairs) << r.run.out;
  EXPECT_EQ(m.matched, r.trace.sends.size());
  EXPECT_EQ(m.matched, r.trace.recvs.size());
}

// The other form of session: the launcher starts one recorder per rank
// (`mpirun -np N parmon record -o RUN -- app`), which write RUN/rank-<K>.ptrace; readers merge
// the directory into one session.
void CheckPerRankSession(const std::string& pattern, int ranks, bool expect_clean_exit) {
  TempDir dir;
  std::vector<std::string> argv = Mpirun(ranks);
  for (const auto& a : {ParmonBin(), std::string("record"), std::string("-q"), std::string("-o"),
                        dir.File("run"), std::string("--"), BinDir() + "/mpi_patterns", pattern})
    argv.push_back(a);
  RunResult run = Run(argv, {}, 90);
  if (expect_clean_exit) {
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  for (int k = 0; k < ranks; ++k)
    EXPECT_FALSE(ReadFile(dir.File("run/rank-" + std::to_string(k) + ".ptrace")).empty()) << k;
  CommTrace t = LoadCommTrace(dir.File("run"));
  ASSERT_TRUE(t.error.empty()) << t.error;
  Expected want = ParseProgramOutput(run.out);
  ASSERT_FALSE(want.pairs.empty()) << run.out << run.err;
  EXPECT_EQ(t.rank_of_pid.size(), static_cast<size_t>(ranks));
  Matching m = MatchMessages(t);
  for (const auto& p : m.problems)
    ADD_FAILURE() << p;
  EXPECT_EQ(m.pairs, want.pairs) << run.out;
  EXPECT_EQ(m.matched, t.sends.size());
  EXPECT_EQ(m.matched, t.recvs.size());
  // `parmon info` reads the directory as one session.
  RunResult info = Parmon({"info", dir.File("run")});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("processes   " + std::to_string(ranks)), std::string::npos) << info.out;
}

TEST(CommMpi, PerRankRecordersGiveOneSession) {
  CheckPerRankSession("ring", 3, true);
}
TEST(CommMpi, PerRankRecordersKeepTheDataOfARankThatDies) {
  CheckPerRankSession("early", 3, false);
}

TEST(CommMpi, PingPongC) {
  CheckMessages("mpi_patterns", "pingpong", 2);
}
TEST(CommMpi, RingC) {
  CheckMessages("mpi_patterns", "ring", 3);
}
TEST(CommMpi, AllToAllC) {
  CheckMessages("mpi_patterns", "alltoall", 3);
}
TEST(CommMpi, HaloC) {
  CheckMessages("mpi_patterns", "halo", 3);
}
TEST(CommMpi, EarlyExitingRankStillLeavesItsData) {
  // The last rank dies without MPI_Finalize after its sends; its events must be there.
  CheckMessages("mpi_patterns", "early", 3, /*expect_clean_exit=*/false);
}

TEST(CommMpi, PeriodicModeCountsMessagesPerPeer) {
  // `parmon record --mode periodic` tells the wrappers (PARMON_MODE) to write per-interval
  // aggregates instead of per-call events; summed, they equal what the program did.
  TempDir dir;
  std::vector<std::string> args = {
      "record", "-q", "--mode", "periodic", "-o", dir.File("run.ptrace"), "--"};
  for (const auto& a : Mpirun(2))
    args.push_back(a);
  args.push_back(BinDir() + "/mpi_patterns");
  args.push_back("pingpong");
  RunResult run = Parmon(args, 90);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  CommTrace t = LoadCommTrace(dir.File("run.ptrace"));
  ASSERT_TRUE(t.error.empty()) << t.error;
  Expected want = ParseProgramOutput(run.out);
  ASSERT_FALSE(want.pairs.empty()) << run.out;
  EXPECT_TRUE(t.sends.empty()) << "per-call events in periodic mode";
  EXPECT_TRUE(t.calls.empty()) << "MpiEnter in periodic mode";
  EXPECT_EQ(t.peer_stats, want.pairs);
  EXPECT_GT(t.stats_calls["MPI_Send"], 0u);
}

TEST(CommMpi, MpichPingPong) {
  // Built only where MPICH is installed next to OpenMPI (scripts/setup.sh installs both).
  if (access((BinDir() + "/mpi_patterns_mpich").c_str(), X_OK) != 0 ||
      access("/usr/bin/mpirun.mpich", X_OK) != 0)
    GTEST_SKIP() << "MPICH is not installed";
  TempDir dir;
  RunResult run = Parmon({"record", "-q", "-o", dir.File("run.ptrace"), "--", "mpirun.mpich", "-np",
                          "2", BinDir() + "/mpi_patterns_mpich", "pingpong"},
                         90);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  CommTrace t = LoadCommTrace(dir.File("run.ptrace"));
  ASSERT_TRUE(t.error.empty()) << t.error;
  Expected want = ParseProgramOutput(run.out);
  ASSERT_FALSE(want.pairs.empty()) << run.out;
  EXPECT_EQ(t.rank_of_pid.size(), 2u);
  Matching m = MatchMessages(t);
  for (const auto& p : m.problems)
    ADD_FAILURE() << p;
  EXPECT_EQ(m.pairs, want.pairs);
  EXPECT_EQ(m.matched, t.sends.size());
  EXPECT_GT(t.calls["MPI_Send"], 0u);
}

TEST(CommMpi, CollectiveBytesPerRankC) {
  TempDir dir;
  Recorded r = RecordMpi(dir, "mpi_patterns", "collectives", 3);
  ASSERT_EQ(r.run.exit_code, 0) << r.run.err;
  Expected want = ParseProgramOutput(r.run.out);
  ASSERT_EQ(want.collectives.size(), 12u * 3u) << r.run.out;
  auto key = [](const MpiCollectiveCall& c) {
    return std::make_tuple(c.rank, c.func, c.sent, c.recv);
  };
  std::multiset<std::tuple<int64_t, std::string, uint64_t, uint64_t>> got, expected;
  for (const auto& c : r.trace.collectives)
    got.insert(key(c));
  for (const auto& c : want.collectives)
    expected.insert(key(c));
  EXPECT_EQ(got, expected);
}

// The Fortran program's messages and collectives, recorded under the C names.
void CheckFortran(const RunResult& run, const CommTrace& trace) {
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ASSERT_TRUE(trace.error.empty()) << trace.error;
  Expected want = ParseProgramOutput(run.out);
  ASSERT_FALSE(want.pairs.empty()) << run.out;
  Matching m = MatchMessages(trace);
  for (const auto& p : m.problems)
    ADD_FAILURE() << p;
  EXPECT_EQ(m.pairs, want.pairs) << run.out;
  std::multiset<std::tuple<int64_t, std::string, uint64_t, uint64_t>> got, expected;
  for (const auto& c : trace.collectives)
    got.insert({c.rank, c.func, c.sent, c.recv});
  for (const auto& c : want.collectives)
    expected.insert({c.rank, c.func, c.sent, c.recv});
  EXPECT_EQ(got, expected);
  EXPECT_EQ(trace.calls.at("MPI_Send"), trace.calls.at("MPI_Recv"));
  EXPECT_GT(trace.calls.at("MPI_Send"), 0u);
}

TEST(CommMpi, FortranPingPongAndCollectives) {
  TempDir dir;
  Recorded r = RecordMpi(dir, "mpi_patterns_f", "", 2);
  CheckFortran(r.run, r.trace);
}

TEST(CommMpi, MpichFortranPingPongAndCollectives) {
  if (access((BinDir() + "/mpi_patterns_f_mpich").c_str(), X_OK) != 0)
    GTEST_SKIP() << "MPICH's Fortran is not installed";
  TempDir dir;
  RunResult run = Parmon({"record", "-q", "-o", dir.File("run.ptrace"), "--", "mpirun.mpich", "-np",
                          "2", BinDir() + "/mpi_patterns_f_mpich"},
                         90);
  CheckFortran(run, LoadCommTrace(dir.File("run.ptrace")));
}

TEST(CommMpi, InjectedClockSkewIsMeasuredAndRemoved) {
  // Rank 1's MPI events are stamped 3 ms late (PARMON_MPI_CLOCK_SKEW_NS, read by the wrapper);
  // the min-RTT ping-pong must measure it to within a few microseconds, and after alignment no
  // receive may complete before its send.
  constexpr double kSkewNs = 3'000'000;
  TempDir dir;
  std::string app = BinDir() + "/mpi_patterns";
  RunResult run =
      Parmon({"record", "-q", "-o", dir.File("run.ptrace"), "--", "mpirun", "--allow-run-as-root",
              "--oversubscribe", "-np", "1", app, "pingpong", ":", "-np", "1", "-x",
              "PARMON_MPI_CLOCK_SKEW_NS=3000000", app, "pingpong"},
             90);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  CommTrace raw = LoadCommTrace(dir.File("run.ptrace"), /*align=*/false);
  ASSERT_EQ(raw.clock_offset_ns.count(1), 1u);
  EXPECT_NEAR(raw.clock_offset_ns[1], kSkewNs, 5000);
  // Without alignment rank 1's sends appear 3 ms late: receives before their sends.
  Matching unaligned = MatchMessages(raw);
  EXPECT_FALSE(unaligned.problems.empty());
  CommTrace aligned = LoadCommTrace(dir.File("run.ptrace"), /*align=*/true);
  Matching m = MatchMessages(aligned);
  for (const auto& p : m.problems)
    ADD_FAILURE() << p;
  EXPECT_EQ(m.matched, 80u);
}

// The clock exchange (32 round trips between rank 0 and each rank) runs at MPI_Init, at
// MPI_Finalize and, by default, after at least 1000 world collectives and about a second apart:
// a loop of 20,000 barriers that takes a few seconds at most gets a few exchanges, not one per
// 1000 barriers (22 in all). Against the program's own clock: at most one per 0.5 s of its loop,
// plus MPI_Init's, the first after 1000 barriers and MPI_Finalize's.
TEST(CommMpi, ClockExchangesAreAboutASecondApartInAFastCollectiveLoop) {
  TempDir dir;
  std::string trace = dir.File("run.ptrace");
  RunResult run = Parmon({"record", "-q", "-o", trace, "--", "mpirun", "--allow-run-as-root",
                          "--oversubscribe", "-np", "2", BinDir() + "/mpi_patterns", "barriers"},
                         120);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  double loop_ns = 0;
  int barriers = 0;
  std::istringstream out(run.out);
  std::string word;
  while (out >> word)
    if (word == "barriers")
      out >> barriers >> loop_ns;
  ASSERT_EQ(barriers, 20000) << run.out;
  RunResult dump = Parmon({"dump", trace});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  size_t syncs = 0;  // each exchange: one MpiClockSync on each of the 2 ranks
  for (size_t at = dump.out.find("MpiClockSync"); at != std::string::npos;
       at = dump.out.find("MpiClockSync", at + 1))
    ++syncs;
  const double exchanges = static_cast<double>(syncs) / 2;
  EXPECT_GE(exchanges, 3);  // MPI_Init's, the first after 1000 barriers, MPI_Finalize's
  EXPECT_LE(exchanges, 3 + loop_ns / 0.5e9) << "loop " << loop_ns / 1e6 << " ms";
  // The exchanges still align: the offsets are measured (the clocks are one here: near 0).
  CommTrace raw = LoadCommTrace(trace, /*align=*/false);
  ASSERT_EQ(raw.clock_offset_ns.count(1), 1u);
  EXPECT_NEAR(raw.clock_offset_ns[1], 0, 100000);
}

}  // namespace
}  // namespace parmon::testing
