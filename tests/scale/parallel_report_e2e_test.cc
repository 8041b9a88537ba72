// End-to-end tests of the parallel report (`mpirun -np K parmon report RUN`, issue 19,
// src/parallel/parallel_report.h): on a generated per-rank session of many ranks over several
// hosts with late senders, and on a real per-rank recording of an MPI program, the report that K
// processes compute together must be the one a single `parmon report` writes, byte for byte, in
// JSON and in text, for K = 2 and K = 3 and for a window of the run. The single process is the
// oracle; when the bytes differ the test names the first JSON field that differs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/e2e.h"
#include "synth/halo_session.h"

namespace parmon::testing {
namespace {

using nlohmann::json;

std::vector<std::string> Mpirun(int np) {
  return {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(np)};
}

// `mpirun -np K parmon report args...`
RunResult ParallelReport(int np,
                         const std::vector<std::string>& args,
                         const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = Mpirun(np);
  argv.push_back(ParmonBin());
  argv.push_back("report");
  for (const auto& a : args)
    argv.push_back(a);
  return Run(argv, env, 240);
}

// The first place where two JSON documents differ, as a path ("" when equal).
std::string FirstDifference(const json& a, const json& b, const std::string& at = "") {
  if (a.type() != b.type())
    return at + " (type)";
  if (a.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key()))
        return at + "/" + it.key() + " (missing)";
      std::string d = FirstDifference(it.value(), b[it.key()], at + "/" + it.key());
      if (!d.empty())
        return d;
    }
    return a.size() == b.size() ? "" : at + " (extra keys)";
  }
  if (a.is_array()) {
    if (a.size() != b.size())
      return at + " (length " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + ")";
    for (size_t i = 0; i < a.size(); ++i) {
      std::string d = FirstDifference(a[i], b[i], at + "/" + std::to_string(i));
      if (!d.empty())
        return d;
    }
    return "";
  }
  return a == b ? "" : at + ": " + a.dump() + " vs " + b.dump();
}

// The report of one process and of np processes, equal byte for byte.
void ExpectSameReport(const std::string& run, int np, const std::vector<std::string>& extra) {
  for (const std::string format : {"json", "text"}) {
    std::vector<std::string> args = {run, "--format", format, "--color", "never"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> plain = {"report"};
    plain.insert(plain.end(), args.begin(), args.end());
    RunResult one = Parmon(plain, 240);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    ASSERT_GT(one.out.size(), 1000u);
    RunResult many = ParallelReport(np, args);
    ASSERT_EQ(many.exit_code, 0) << many.err;
    // Only process 0 writes: the report once, and nothing on stderr.
    EXPECT_EQ(many.err, "") << format;
    if (format == "json" && many.out != one.out) {
      json a = json::parse(one.out, nullptr, false), b = json::parse(many.out, nullptr, false);
      ASSERT_FALSE(b.is_discarded()) << many.out.substr(0, 2000);
      ADD_FAILURE() << "np " << np << ": the JSON reports differ at " << FirstDifference(a, b);
    }
    EXPECT_TRUE(many.out == one.out) << "np " << np << " format " << format << ": "
                                     << one.out.size() << " vs " << many.out.size() << " bytes";
  }
}

// A generated session of `ranks` ranks (20 iterations) in run, and its one-process JSON report.
void SmallSession(const std::string& run, uint32_t ranks, RunResult* one) {
  synth::HaloOptions o;
  o.ranks = ranks;
  o.iterations = 20;
  auto truth = synth::WriteHaloSession(run, o);
  ASSERT_TRUE(truth.ok()) << truth.status().message();
  *one = Parmon({"report", run, "--format", "json"});
  ASSERT_EQ(one->exit_code, 0) << one->err;
}

TEST(ParallelReport, GeneratedSessionOfManyRanksIsTheSameReport) {
  TempDir dir;
  synth::HaloOptions o;
  o.ranks = 96;
  o.iterations = 30;
  o.compute_ns = 300000;
  o.late_every = 4;
  o.late_ns = 2000000;
  o.ranks_per_host = 8;
  o.host_offset_ns = 3000000;  // 12 hosts, clocks offset by up to +-15 ms
  o.threads = 2;
  o.chunk_bytes = 16u << 10;  // several chunks per stream
  auto truth = synth::WriteHaloSession(dir.File("run"), o);
  ASSERT_TRUE(truth.ok()) << truth.status().message();
  ExpectSameReport(dir.File("run"), 2, {});
  // Three processes: process 0 merges two inputs.
  ExpectSameReport(dir.File("run"), 3, {});
  // A window of the run (the senders' merges start and stop where the engine's window does).
  ExpectSameReport(dir.File("run"), 2, {"--from", "2ms", "--to", "6ms", "--interval", "500us"});
}

TEST(ParallelReport, RealPerRankRecordingIsTheSameReport) {
  TempDir dir;
  std::vector<std::string> argv = Mpirun(4);
  for (const auto& a :
       {ParmonBin(), std::string("record"), std::string("-q"), std::string("-o"), dir.File("run"),
        std::string("--"), BinDir() + "/mpi_patterns", std::string("halo")})
    argv.push_back(a);
  RunResult rec = testing::Run(argv, {}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  ExpectSameReport(dir.File("run"), 2, {});
  ExpectSameReport(dir.File("run"), 3, {});
}

TEST(ParallelReport, UnderMpichsLauncherToo) {
  // MPICH's launcher sets PMI_SIZE/PMI_RANK only: parmon loads libparmon_report_mpich.so.
  if (access("/usr/bin/mpirun.mpich", X_OK) != 0 ||
      !Exists(LibDir() + "/libparmon_report_mpich.so"))
    GTEST_SKIP() << "MPICH (mpirun.mpich, libparmon_report_mpich.so) is not installed";
  TempDir dir;
  RunResult one;
  ASSERT_NO_FATAL_FAILURE(SmallSession(dir.File("run"), 32, &one));
  RunResult many = testing::Run(
      {"mpirun.mpich", "-np", "2", ParmonBin(), "report", dir.File("run"), "--format", "json"}, {},
      240);
  ASSERT_EQ(many.exit_code, 0) << many.err;
  EXPECT_EQ(many.err, "");
  EXPECT_TRUE(many.out == one.out) << one.out.size() << " vs " << many.out.size() << " bytes";
}

TEST(ParallelReport, WithoutItsMpiLibraryProcessZeroReportsAlone) {
  TempDir dir;
  RunResult one;
  ASSERT_NO_FATAL_FAILURE(SmallSession(dir.File("run"), 16, &one));
  RunResult many = ParallelReport(2, {dir.File("run"), "--format", "json"},
                                  {"PARMON_REPORT_MPI_LIB=" + dir.File("no-such-lib.so")});
  ASSERT_EQ(many.exit_code, 0) << many.err;
  EXPECT_EQ(many.out, one.out);
  // One sentence, from process 0 only.
  EXPECT_NE(many.err.find("cannot load the MPI library of the parallel report"), std::string::npos)
      << many.err;
  EXPECT_EQ(many.err.find("reporting in one process"), many.err.rfind("reporting in one process"))
      << many.err;
}

TEST(ParallelReport, ParmonItselfDoesNotNeedMpi) {
  // MPI is in libparmon_report_mpi.so, loaded only under a launcher: parmon's own dependencies
  // (its ELF NEEDED entries, as the dynamic loader resolves them) include no MPI library.
  RunResult ldd = testing::Run({"ldd", ParmonBin()});
  ASSERT_EQ(ldd.exit_code, 0) << ldd.err;
  EXPECT_EQ(ldd.out.find("libmpi"), std::string::npos) << ldd.out;
  RunResult lib = testing::Run({"ldd", LibDir() + "/libparmon_report_mpi.so"});
  ASSERT_EQ(lib.exit_code, 0) << lib.err;
  EXPECT_NE(lib.out.find("libmpi"), std::string::npos) << lib.out;
}

}  // namespace
}  // namespace parmon::testing
