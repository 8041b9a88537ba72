// Self-monitoring of MPI ranks (docs/selfmon.md), end to end with real Open MPI processes:
//   - MpiRanksWatchEachOther: under one recorder (`parmon record -- mpirun -np 3`), every rank
//     watches its own main thread and, by pid (parmon_monitor_watch_pid), every other rank's;
//     each of the nine reads is held against `parmon report --from A --to B` of the same span
//     (every state within 2 points: the time inside MPI calls is communication in both, however
//     Open MPI waited) and against the watched rank's own timing of its computing and its wait in
//     MPI_Barrier (5 points: the read's span is the sampler's passes, not the program's loop);
//   - MpiRanksPerRankRecorders: with one recorder per rank (`mpirun -np 2 parmon record`), a rank
//     reads itself the same way, and watching the other rank is refused (PARMON_E_INVALID): its
//     process is another recorder's.
// tests/selfmon/selfmon_mpi.c is the program: rank r computes (r + 1) units per round, then all
// meet in a barrier, so rank 0 waits most.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/e2e.h"

namespace parmon::testing {
namespace {

using nlohmann::json;

constexpr int kStates = 7;
const char* const kStateNames[kStates] = {"running",    "runnable", "comm_wait", "lock_wait",
                                          "timer_wait", "io_wait",  "other"};

struct Read {
  int reader = -1, of = -1, tid = 0;
  uint64_t start = 0, end = 0, elapsed = 0;
  uint64_t states[kStates] = {};
  uint64_t cpu_ns = 0;
  unsigned flags = 0;
  double Pct(int s) const { return 100.0 * static_cast<double>(states[s]) / elapsed; }
};

struct Truth {
  int pid = 0;
  double loop = 0, compute = 0, mpi = 0;  // ns, by the program's clock
};

struct RankFiles {
  std::map<int, Truth> truth;                // by rank
  std::map<std::pair<int, int>, int> watch;  // (reader, of) -> rc
  std::vector<Read> reads;
};

RankFiles ParseRanks(const TempDir& dir, int ranks) {
  RankFiles r;
  for (int k = 0; k < ranks; ++k) {
    std::istringstream in(ReadFile(dir.File("rank-" + std::to_string(k) + ".txt")));
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream l(line);
      std::string tag;
      l >> tag;
      if (tag == "truth") {
        int rank = -1;
        Truth t;
        l >> rank >> t.pid >> t.loop >> t.compute >> t.mpi;
        if (l)
          r.truth[rank] = t;
      } else if (tag == "watch") {
        int reader = -1, of = -1, rc = -1;
        l >> reader >> of >> rc;
        r.watch[{reader, of}] = rc;
      } else if (tag == "figures") {
        Read f;
        l >> f.reader >> f.of >> f.tid >> f.start >> f.end >> f.elapsed;
        for (uint64_t& s : f.states)
          l >> s;
        l >> f.cpu_ns >> f.flags;
        if (l)
          r.reads.push_back(f);
      }
    }
  }
  return r;
}

// The read against the watched rank's own timing of its loop: computing is running or queued
// (it spins on the wall clock), the barrier is communication.
void ExpectMatchesTruth(const Read& f, const Truth& t) {
  SCOPED_TRACE("rank " + std::to_string(f.reader) + " reading rank " + std::to_string(f.of));
  EXPECT_EQ(f.flags, 0u);
  EXPECT_GT(f.elapsed, static_cast<uint64_t>(0.8 * t.loop));
  uint64_t sum = 0;
  for (uint64_t s : f.states)
    sum += s;
  EXPECT_NEAR(static_cast<double>(sum), static_cast<double>(f.elapsed), 1e6);
  const double compute_pct = 100.0 * t.compute / t.loop, mpi_pct = 100.0 * t.mpi / t.loop;
  std::printf(
      "rank %d reads rank %d: running+queued %.1f%% (program: computing %.1f%%), comm "
      "%.1f%% (program: MPI %.1f%%)\n",
      f.reader, f.of, f.Pct(0) + f.Pct(1), compute_pct, f.Pct(2), mpi_pct);
  EXPECT_NEAR(f.Pct(0) + f.Pct(1), compute_pct, 5.0);
  EXPECT_NEAR(f.Pct(2), mpi_pct, 5.0);
}

// Each read against `parmon report --format json --from --to` over its own span, on `trace` (a
// file or a per-rank directory); returns how many reads were compared.
int ExpectMatchesReport(const std::string& trace, const std::vector<Read>& reads) {
  RunResult whole = Parmon({"report", trace, "--format", "json"});
  EXPECT_EQ(whole.exit_code, 0) << whole.err;
  if (whole.exit_code != 0)
    return 0;
  const uint64_t session_start = json::parse(whole.out)["summary"]["session_start_ns"];
  std::map<std::pair<uint64_t, uint64_t>, json> by_span;
  int compared = 0;
  for (const Read& f : reads) {
    SCOPED_TRACE("rank " + std::to_string(f.reader) + " reading rank " + std::to_string(f.of));
    if (f.start <= session_start || f.end <= f.start) {
      ADD_FAILURE() << "read span " << f.start << ".." << f.end << ", session from "
                    << session_start;
      continue;
    }
    auto [it, added] = by_span.try_emplace({f.start, f.end});
    if (added) {
      RunResult rep = Parmon({"report", trace, "--format", "json", "--from",
                              std::to_string(f.start - session_start) + "ns", "--to",
                              std::to_string(f.end - session_start) + "ns"});
      EXPECT_EQ(rep.exit_code, 0) << rep.err;
      it->second = rep.exit_code == 0 ? json::parse(rep.out) : json::object();
    }
    const json& report = it->second;
    if (!report.contains("locations"))
      continue;
    const double window = static_cast<double>(report["summary"]["duration_ns"].get<uint64_t>());
    EXPECT_NEAR(window, static_cast<double>(f.elapsed), 1e3);
    for (const json& loc : report["locations"]) {
      if (loc["kind"] != "thread" || loc["tid"] != f.tid)
        continue;
      ++compared;
      for (int s = 0; s < kStates; ++s) {
        const double report_pct = 100.0 * loc["states_ns"][kStateNames[s]].get<double>() / window;
        EXPECT_NEAR(f.Pct(s), report_pct, 2.0) << kStateNames[s];
      }
    }
  }
  return compared;
}

bool Available() {
  return Exists(BinDir() + "/selfmon_mpi") && Exists(LibDir() + "/libparmon_mpi.so");
}

std::vector<std::string> Mpirun(int np) {
  return {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(np)};
}

TEST(SelfMonitoring, MpiRanksWatchEachOther) {
  if (!Available())
    GTEST_SKIP() << "needs MPI and libparmon_mpi";
  constexpr int kRanks = 3;
  TempDir dir;
  const std::string trace = dir.File("mpi.ptrace");
  std::vector<std::string> args = {"record", "-q", "-o", trace, "--"};
  for (const std::string& a : Mpirun(kRanks))
    args.push_back(a);
  for (const std::string& a :
       {BinDir() + "/selfmon_mpi", dir.path(), std::string("12"), std::string("25")})
    args.push_back(a);
  RunResult rec = Parmon(args, 300);
  ASSERT_EQ(rec.exit_code, 0) << rec.out << rec.err;
  const RankFiles r = ParseRanks(dir, kRanks);
  ASSERT_EQ(r.truth.size(), static_cast<size_t>(kRanks));
  for (const auto& [who, rc] : r.watch)
    EXPECT_EQ(rc, 0) << "rank " << who.first << " watching rank " << who.second;
  ASSERT_EQ(r.reads.size(), static_cast<size_t>(kRanks * kRanks));
  for (const Read& f : r.reads) {
    EXPECT_EQ(f.tid, r.truth.at(f.of).pid);  // the watched rank's main thread
    ExpectMatchesTruth(f, r.truth.at(f.of));
  }
  EXPECT_EQ(ExpectMatchesReport(trace, r.reads), kRanks * kRanks);
  // What the ranks were made to do: rank 0 waits most, the last rank least.
  for (const Read& f : r.reads)
    if (f.reader == 0 && f.of == 0)
      EXPECT_GT(f.Pct(2), 40.0);
}

TEST(SelfMonitoring, MpiRanksPerRankRecorders) {
  if (!Available())
    GTEST_SKIP() << "needs MPI and libparmon_mpi";
  constexpr int kRanks = 2;
  TempDir dir;
  const std::string run = dir.File("run");
  std::vector<std::string> args = Mpirun(kRanks);
  for (const std::string& a : {ParmonBin(), std::string("record"), std::string("-q"),
                               std::string("-o"), run, std::string("--"), BinDir() + "/selfmon_mpi",
                               dir.path(), std::string("12"), std::string("25")})
    args.push_back(a);
  RunResult rec = parmon::testing::Run(args, {}, 300);
  ASSERT_EQ(rec.exit_code, 0) << rec.out << rec.err;
  const RankFiles r = ParseRanks(dir, kRanks);
  ASSERT_EQ(r.truth.size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(r.watch.at({0, 1}), 4);  // PARMON_E_INVALID: rank 1 is another recorder's
  EXPECT_EQ(r.watch.at({1, 0}), 4);
  ASSERT_EQ(r.reads.size(), static_cast<size_t>(kRanks));
  for (const Read& f : r.reads) {
    EXPECT_EQ(f.reader, f.of);
    ExpectMatchesTruth(f, r.truth.at(f.of));
    EXPECT_EQ(ExpectMatchesReport(run + "/rank-" + std::to_string(f.reader) + ".ptrace", {f}), 1);
  }
}

}  // namespace
}  // namespace parmon::testing
