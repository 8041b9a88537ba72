// End-to-end tests of the examples (examples/, docs/examples.md): every example runs under
// `parmon record`, must pass its own self-check, and what the trace holds must equal what the
// example counted itself in its --counts side file:
//   - regions entered, per thread (found by the name it gave parmon_thread_name), exactly;
//   - parmon_trace_data events per event id, exactly;
//   - for MPI examples, once the trace has MPI events (libparmon_mpi, docs/comm.md): per rank,
//     point-to-point messages and bytes to and from every peer, and collective calls.
// Sizes are small so each test takes a few seconds on a busy 2-core machine.
#include <dirent.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "comm/comm_trace.h"
#include "format/matrix.h"
#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"
#include "parmon/parmon.h"
#include "support/e2e.h"

namespace parmon::testing {
namespace {

using nlohmann::json;

// What the trace says one named thread did.
struct Seen {
  std::map<std::string, uint64_t> regions;
  std::map<std::string, uint64_t> trace_data;  // event id (as text) -> events
  // Successful reads and writes on pipes other than standard input, output and error.
  uint64_t pipe_writes = 0, pipe_write_bytes = 0, pipe_reads = 0, pipe_read_bytes = 0;
  // CPUs of the context switches into this thread after its first region entry.
  std::map<uint64_t, uint64_t> switch_in_cpus;
};

struct Recorded {
  RunResult run;
  json counts;
  std::map<std::string, Seen> threads;  // by thread name
  uint64_t lost = 0;
  bool has_mpi = false;   // the trace holds MpiInit events
  bool has_chan = false;  // the trace holds ChanInfo events
  CommTrace comm;
  std::string trace_path;
};

// MPI examples are built only when CMake found an MPI.
#define PARMON_REQUIRE_MPI_EXAMPLES() \
  if (!PARMON_EXAMPLES_MPI)           \
  GTEST_SKIP() << "parmon was built without MPI"

std::vector<std::string> MpiRun(int ranks) {
  return {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks)};
}

// Records BinDir()/example with args (under mpirun when ranks > 0) and loads the trace and the
// example's side file. `dir` must outlive the result's use of trace_path.
Recorded RecordExample(const TempDir& dir,
                       const std::string& example,
                       const std::vector<std::string>& args,
                       int ranks = 0) {
  Recorded r;
  r.trace_path = dir.File("run.ptrace");
  std::string counts = dir.File("counts.json");
  std::vector<std::string> argv = {ParmonBin(), "record", "-q",         "--overflow",
                                   "block",     "-o",     r.trace_path, "--"};
  if (ranks > 0) {
    auto mpirun = MpiRun(ranks);
    argv.insert(argv.end(), mpirun.begin(), mpirun.end());
  }
  argv.push_back(BinDir() + "/" + example);
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--counts");
  argv.push_back(counts);
  r.run = Run(argv, {}, 60);
  std::string text = ReadFile(counts);
  if (!text.empty())
    r.counts = json::parse(text, nullptr, /*allow_exceptions=*/false);

  auto reader = format::TraceReader::Open(r.trace_path);
  if (!reader.ok())
    return r;
  const format::Definitions& defs = (*reader)->definitions();
  auto session = model::Session::Over(**reader);
  if (!session.ok())
    return r;
  model::Merge cursor(**session);
  format::Event e;
  std::map<std::pair<uint32_t, uint64_t>, uint64_t> fd_type;  // (pid, fd) -> ChanInfo type
  while (cursor.Next(&e)) {
    auto loc = defs.locations.find(e.location);
    std::string name = loc == defs.locations.end() ? "" : loc->second.name;
    uint32_t pid = loc == defs.locations.end() ? 0 : loc->second.pid;
    auto on_pipe = [&] { return e.args[0] > 2 && fd_type[{pid, e.args[0]}] == 1; };
    auto bytes = static_cast<int64_t>(e.args[1]);
    switch (e.kind_enum()) {
      case format::Kind::kChanInfo:
        r.has_chan = true;
        fd_type[{pid, e.args[0]}] = e.args[1];
        break;
      case format::Kind::kChanWrite:
        if (on_pipe() && bytes > 0) {
          ++r.threads[name].pipe_writes;
          r.threads[name].pipe_write_bytes += static_cast<uint64_t>(bytes);
        }
        break;
      case format::Kind::kChanRead:
        if (on_pipe() && bytes > 0) {
          ++r.threads[name].pipe_reads;
          r.threads[name].pipe_read_bytes += static_cast<uint64_t>(bytes);
        }
        break;
      case format::Kind::kRegionEnter:
        ++r.threads[name].regions[defs.Name(static_cast<uint32_t>(e.args[0]))];
        break;
      case format::Kind::kSwitchIn:
        if (r.threads.count(name) && !r.threads[name].regions.empty())
          ++r.threads[name].switch_in_cpus[e.args[0]];
        break;
      case format::Kind::kTraceData:
        ++r.threads[name].trace_data[std::to_string(e.args[0])];
        break;
      case format::Kind::kLost:
      case format::Kind::kRingLost:
        r.lost += e.args[0];
        break;
      case format::Kind::kMpiInit:
        r.has_mpi = true;
        break;
      default:
        break;
    }
  }
  if (r.has_mpi)
    r.comm = LoadCommTrace(r.trace_path, /*align=*/false);
  return r;
}

// Is there a preload library whose name holds `family` next to libparmon? Then the examples
// must record that family's events.
bool PreloadBuilt(const std::string& family) {
  DIR* d = opendir(LibDir().c_str());
  if (!d)
    return false;
  bool found = false;
  while (dirent* entry = readdir(d))
    found = found || std::string(entry->d_name).find("libparmon_" + family) == 0;
  closedir(d);
  return found;
}

std::map<std::string, uint64_t> AsCounts(const json& object) {
  std::map<std::string, uint64_t> m;
  if (object.is_object())
    for (auto it = object.begin(); it != object.end(); ++it)
      m[it.key()] = it.value();
  return m;
}

// The common checks: the run and its self-check passed, nothing was lost, and every location of
// the side file has exactly its regions and trace_data events in the trace.
void ExpectCountsMatch(const Recorded& r, size_t expected_locations) {
  ASSERT_EQ(r.run.exit_code, 0) << r.run.out << r.run.err;
  ASSERT_TRUE(r.counts.is_object()) << "no counts file written\n" << r.run.out << r.run.err;
  EXPECT_TRUE(r.counts["ok"].get<bool>()) << r.counts.dump(2);
  EXPECT_EQ(r.lost, 0u);
  ASSERT_EQ(r.counts["locations"].size(), expected_locations);
  uint64_t regions_total = 0;
  for (const json& loc : r.counts["locations"]) {
    std::string thread = loc["thread"];
    SCOPED_TRACE("thread " + thread);
    auto seen = r.threads.find(thread);
    auto expected = AsCounts(loc["regions"]);
    for (const auto& [name, n] : expected)
      regions_total += n;
    if (expected.empty() && AsCounts(loc["trace_data"]).empty())
      continue;
    ASSERT_NE(seen, r.threads.end()) << "no events recorded for " << thread;
    EXPECT_EQ(seen->second.regions, expected);
    EXPECT_EQ(seen->second.trace_data, AsCounts(loc["trace_data"]));
  }
  EXPECT_GT(regions_total, 0u);
}

// MPI checks, active once the trace has MPI events (and required when the wrapper is built).
void ExpectMessagesMatch(const Recorded& r) {
  if (PreloadBuilt("mpi")) {
    EXPECT_TRUE(r.has_mpi) << "libparmon_mpi is built but recorded nothing";
  }
  if (!r.has_mpi)
    return;
  ASSERT_TRUE(r.comm.error.empty()) << r.comm.error;
  using PerPeer = std::map<int64_t, std::pair<uint64_t, uint64_t>>;  // peer -> (messages, bytes)
  std::map<int64_t, PerPeer> sent, received;
  std::map<int64_t, std::map<std::string, uint64_t>> collectives;
  for (const auto& s : r.comm.sends) {
    ++sent[s.rank][s.peer].first;
    sent[s.rank][s.peer].second += s.bytes;
  }
  for (const auto& m : r.comm.recvs) {
    ++received[m.rank][m.peer].first;
    received[m.rank][m.peer].second += m.bytes;
  }
  for (const auto& c : r.comm.collectives)
    ++collectives[c.rank][c.func];
  for (const json& loc : r.counts["locations"]) {
    int64_t rank = loc["rank"];
    SCOPED_TRACE("rank " + std::to_string(rank));
    PerPeer want_sent, want_received;
    for (auto& [peer, n] : AsCounts(loc["messages_sent"]))
      want_sent[std::stoll(peer)] = {n, loc["bytes_sent"][peer].get<uint64_t>()};
    for (auto& [peer, n] : AsCounts(loc["messages_received"]))
      want_received[std::stoll(peer)] = {n, loc["bytes_received"][peer].get<uint64_t>()};
    EXPECT_EQ(sent[rank], want_sent);
    EXPECT_EQ(received[rank], want_received);
    EXPECT_EQ(collectives[rank], AsCounts(loc["collectives"]));
  }
}

TEST(Examples, RingSearchSlowForm) {
  PARMON_REQUIRE_MPI_EXAMPLES();
  TempDir dir;
  auto r =
      RecordExample(dir, "ring_search", {"--form", "slow", "--words", "150", "--db-kb", "64"}, 4);
  ExpectCountsMatch(r, 4);
  ExpectMessagesMatch(r);
  // The farm's structure: every word is handed to worker 1 and searched by each worker once.
  const json& locations = r.counts["locations"];
  EXPECT_EQ(locations[0]["messages_sent"]["1"], 151);  // 150 words and the stop message
  for (int w = 1; w < 4; ++w)
    EXPECT_EQ(locations[w]["regions"]["search"], 150);
  // Worker w forwards the word (not the last) and the w results, its own included, per word.
  EXPECT_EQ(locations[1]["messages_sent"]["2"], 150 * 2 + 1);
  EXPECT_EQ(locations[3]["messages_sent"]["0"], 150 * 3 + 1);
}

TEST(Examples, RingSearchFixedForm) {
  PARMON_REQUIRE_MPI_EXAMPLES();
  TempDir dir;
  auto r =
      RecordExample(dir, "ring_search", {"--form", "fixed", "--words", "150", "--db-kb", "64"}, 4);
  ExpectCountsMatch(r, 4);
  ExpectMessagesMatch(r);
  EXPECT_EQ(r.counts["locations"][0]["messages_received"]["3"], 150 * 3 + 1);
}

uint64_t Sum(const json& per_peer) {
  uint64_t total = 0;
  for (auto& [peer, n] : AsCounts(per_peer))
    total += n;
  return total;
}

// Once the trace has channel events (libparmon_posix): every thread's recorded pipe writes and
// the bytes it wrote and read equal the messages and bytes it counted; with
// `one_read_per_message`, so do its reads.
void ExpectPipeTrafficMatches(const Recorded& r, bool one_read_per_message) {
  if (PreloadBuilt("posix")) {
    EXPECT_TRUE(r.has_chan) << "libparmon_posix is built but recorded no channel";
  }
  if (!r.has_chan)
    return;
  for (const json& loc : r.counts["locations"]) {
    std::string thread = loc["thread"];
    SCOPED_TRACE(thread);
    const Seen& seen = r.threads.at(thread);
    EXPECT_EQ(seen.pipe_writes, Sum(loc["messages_sent"]));
    EXPECT_EQ(seen.pipe_write_bytes, Sum(loc["bytes_sent"]));
    if (one_read_per_message) {
      EXPECT_EQ(seen.pipe_reads, Sum(loc["messages_received"]));
    }
    EXPECT_EQ(seen.pipe_read_bytes, Sum(loc["bytes_received"]));
  }
}

// The farm on a ring of processes and pipes: regions always; once the trace has channel events
// (libparmon_posix), every frame must be one recorded write and one recorded read.
void ExpectPipeFarmMatches(const std::string& form, size_t locations) {
  TempDir dir;
  auto r = RecordExample(dir, "ring_search_pipes",
                         {"--form", form, "--workers", "3", "--words", "200", "--db-kb", "64"});
  ExpectCountsMatch(r, locations);
  for (int w = 1; w <= 3; ++w) {
    const json* worker = nullptr;
    for (const json& loc : r.counts["locations"])
      if (loc["thread"] == "worker-" + std::to_string(w))
        worker = &loc;
    ASSERT_NE(worker, nullptr) << w;
    EXPECT_EQ((*worker)["regions"]["search"], 200);
    EXPECT_EQ(Sum((*worker)["messages_sent"]), 200u * (w == 3 ? 3 : w + 1) + 1) << w;
  }
  ExpectPipeTrafficMatches(r, /*one_read_per_message=*/true);
}

TEST(Examples, RingSearchPipesSlowForm) {
  ExpectPipeFarmMatches("slow", 4);
}
TEST(Examples, RingSearchPipesFixedForm) {
  ExpectPipeFarmMatches("fixed", 5);
}

// The mergesort tree as forked processes: node k > 0 gets one list from its parent and returns
// it; a list is one write but may take several reads.
TEST(Examples, MergesortProcesses) {
  TempDir dir;
  auto r = RecordExample(dir, "mergesort_procs", {"--n", "300000", "--nodes", "4"});
  ExpectCountsMatch(r, 4);
  for (const json& loc : r.counts["locations"]) {
    if (loc["thread"] == "node-0")
      continue;
    EXPECT_EQ(loc["regions"]["receive_work"], 1) << loc["thread"];
  }
  ExpectPipeTrafficMatches(r, /*one_read_per_message=*/false);
}

TEST(Examples, Saturation) {
  PARMON_REQUIRE_MPI_EXAMPLES();
  TempDir dir;
  auto r = RecordExample(dir, "saturation", {"--rounds", "40", "--bytes", "2000"}, 3);
  ExpectCountsMatch(r, 3);
  ExpectMessagesMatch(r);
  // Every rank sends every round to each other rank.
  for (const json& loc : r.counts["locations"]) {
    for (auto& [peer, n] : AsCounts(loc["messages_sent"]))
      EXPECT_EQ(n, 40u) << peer;
  }
}

TEST(Examples, Trisolve) {
  PARMON_REQUIRE_MPI_EXAMPLES();
  TempDir dir;
  auto r = RecordExample(dir, "trisolve", {"--n", "300", "--block", "10"}, 3);
  ExpectCountsMatch(r, 3);
  ExpectMessagesMatch(r);
  EXPECT_LT(r.counts["results"]["relative_residual"].get<double>(), 1e-10);
  // Rank 0 sends rank 1 its 10 blocks of 10 rows, one message per row, and nothing else (the
  // solutions go round the ring the other way: rank 0 passes them to rank 2).
  EXPECT_EQ(r.counts["locations"][0]["messages_sent"]["1"], 100);
}

TEST(Examples, Mergesort) {
  PARMON_REQUIRE_MPI_EXAMPLES();
  TempDir dir;
  auto r = RecordExample(dir, "mergesort", {"--n", "300000"}, 4);
  ExpectCountsMatch(r, 4);
  ExpectMessagesMatch(r);
  // The tree 0 -> 1, 0 -> 2, 1 -> 3: every rank but 0 gets one list and returns it.
  for (int rank = 1; rank < 4; ++rank)
    EXPECT_EQ(r.counts["locations"][rank]["regions"]["receive_work"], 1);
}

TEST(Examples, JacobiSendsOffDiagonalDataAndItsMatrixEverySweep) {
  TempDir dir;
  auto r = RecordExample(dir, "jacobi", {"--n", "96", "--threads", "2"});
  ExpectCountsMatch(r, 2);
  int sweeps = r.counts["results"]["sweeps"];
  EXPECT_GT(sweeps, 3);
  EXPECT_EQ(r.counts["locations"][0]["trace_data"]["1"], sweeps);
  // Each payload is the 16 x 16 grid of floats.
  auto reader = format::TraceReader::Open(r.trace_path);
  ASSERT_TRUE(reader.ok());
  auto session = model::Session::Over(**reader);
  ASSERT_TRUE(session.ok()) << session.status().message();
  model::Merge cursor(**session);
  format::Event e;
  int payloads = 0;
  // The matrix A (96 x 96 doubles: 3 parts of 32 KiB per step), every step assembled from its
  // parts and summed in row-major order as the program summed it.
  std::map<uint64_t, std::vector<double>> steps;
  std::map<uint64_t, uint64_t> filled;
  while (cursor.Next(&e)) {
    if (e.kind_enum() == format::Kind::kTraceData) {
      EXPECT_EQ(e.payload.size(), 16u * 16u * sizeof(float));
      ++payloads;
    }
    if (e.kind_enum() == format::Kind::kMatrixData) {
      auto part = format::DecodeMatrixPart(e);
      ASSERT_TRUE(part.ok()) << part.status().message();
      EXPECT_EQ(session.value()->definitions().Name(part->matrix), "A");
      ASSERT_EQ(part->rows, 96u);
      ASSERT_EQ(part->cols, 96u);
      EXPECT_FALSE(part->column_major);
      auto& m = steps[part->step];
      m.resize(96 * 96);
      for (uint64_t i = 0; i < part->count(); ++i)
        m[part->offset + i] = part->At(i);
      filled[part->step] += part->count();
    }
  }
  EXPECT_EQ(payloads, sweeps);
  const json& oracle = r.counts["results"]["matrix_steps"];
  ASSERT_EQ(oracle.size(), static_cast<size_t>(sweeps));
  ASSERT_EQ(steps.size(), oracle.size());
  for (const json& o : oracle) {
    const uint64_t step = o["step"];
    SCOPED_TRACE(step);
    EXPECT_EQ(o["result"], PARMON_OK);
    EXPECT_EQ(filled[step], 96u * 96u);
    const std::vector<double>& m = steps[step];
    double sum = 0;
    for (double x : m)
      sum += x;
    EXPECT_EQ(sum, o["sum"].get<double>());
    EXPECT_EQ(m[0], o["first"].get<double>());
    EXPECT_EQ(m[1], o["second"].get<double>());
    EXPECT_EQ(m.back(), o["last"].get<double>());
  }
}

TEST(Examples, MatmulGangMoreThreadsThanCpus) {
  TempDir dir;
  auto r = RecordExample(dir, "matmul_gang", {"--n", "240", "--threads", "5"});
  ExpectCountsMatch(r, 5);
  uint64_t blocks = 0;
  for (const json& loc : r.counts["locations"])
    blocks += loc["regions"]["multiply"].get<uint64_t>();
  EXPECT_EQ(blocks, 5u * 6u);  // 48 rows per thread in blocks of 8
}

TEST(Examples, TimeshareTwoThreadsOnOneCpu) {
  TempDir dir;
  auto r = RecordExample(dir, "timeshare", {"--range", "150000", "--slices", "12"});
  ExpectCountsMatch(r, 2);
  uint64_t cpu = r.counts["params"]["cpu"];
  for (const json& loc : r.counts["locations"]) {
    EXPECT_EQ(loc["regions"]["slice"], 12);
    // Pinned before its first slice: every later context switch into it is onto that CPU
    // (checked when the kernel let parmon record context switches).
    for (const auto& [on, n] : r.threads.at(loc["thread"]).switch_in_cpus)
      EXPECT_EQ(on, cpu) << loc["thread"] << " switched in " << n << " times on CPU " << on;
  }
}

TEST(Examples, PipelineWithBottleneckStage) {
  TempDir dir;
  auto r = RecordExample(dir, "pipeline", {"--blocks", "400", "--slow", "hash"});
  ExpectCountsMatch(r, 4);
  // Every block (and the end marker) crosses every channel once.
  for (int s = 0; s < 3; ++s)
    EXPECT_EQ(r.counts["locations"][s]["messages_sent"][std::to_string(s + 1)], 401);
}

// The balancing example (docs/selfmon.md): its workers' rounds as counted, and it could read the
// monitor (recorded). Whether balancing pays is tests/selfmon's question.
TEST(Examples, BalanceReadsItsWorkersShares) {
  if (std::thread::hardware_concurrency() < 2)
    GTEST_SKIP() << "needs two CPUs";
  TempDir dir;
  auto r = RecordExample(dir, "balance", {"--units", "800", "--round", "200", "--spinners", "2"});
  ExpectCountsMatch(r, 2);
  EXPECT_TRUE(r.counts["results"]["recorded"].get<bool>());
  EXPECT_EQ(r.counts["results"]["rounds"], 4);
  EXPECT_EQ(r.counts["results"]["shares_read"].size(), 4u);
}

// A bad argument gets one sentence on stderr and exit status 2, before any MPI start-up.
TEST(Examples, BadArgumentsAreRefusedInOneSentence) {
  for (std::string example :
       {"ring_search", "ring_search_pipes", "saturation", "trisolve", "mergesort",
        "mergesort_procs", "jacobi", "matmul_gang", "timeshare", "pipeline", "balance"}) {
    SCOPED_TRACE(example);
    bool mpi = example == "ring_search" || example == "saturation" || example == "trisolve" ||
               example == "mergesort";
    if (mpi && !PARMON_EXAMPLES_MPI)
      continue;
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"--bogus"}, {"--counts"}}) {
      RunResult r = parmon::testing::Run({BinDir() + "/" + example, args[0]}, {}, 30);
      EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
  RunResult r = parmon::testing::Run({BinDir() + "/ring_search_pipes", "--form", "quick"}, {}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("must be one of slow, fixed"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace parmon::testing

namespace parmon::testing {
namespace {

// `parmon demo` (small): records the ring example under mpirun, prints the report, writes the
// HTML report, and says where it is.
TEST(Examples, ParmonDemoRecordsAndReports) {
  PARMON_REQUIRE_MPI_EXAMPLES();
  TempDir dir;
  RunResult r =
      Parmon({"demo", "--dir", dir.path(), "--ranks", "3", "--words", "60", "--db-kb", "64"}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("all hit counts correct"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("$ parmon report " + dir.File("demo.ptrace")), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HTML report: " + dir.File("demo.html")), std::string::npos) << r.out;
  EXPECT_GT(ReadFile(dir.File("demo.html")).size(), 1000u);
  auto reader = format::TraceReader::Open(dir.File("demo.ptrace"));
  ASSERT_TRUE(reader.ok());
  EXPECT_GT((*reader)->total_events(), 0u);
}

// Without MPI (--pipes, or no mpirun) the demo records the farm as processes joined by pipes.
TEST(Examples, ParmonDemoWithPipes) {
  TempDir dir;
  RunResult r = Parmon(
      {"demo", "--pipes", "--dir", dir.path(), "--ranks", "4", "--words", "60", "--db-kb", "64"},
      60);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ring_search_pipes --workers 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("all hit counts correct"), std::string::npos) << r.out;
  EXPECT_GT(ReadFile(dir.File("demo.html")).size(), 1000u);
}

TEST(Examples, ParmonDemoRefusesBadArguments) {
  RunResult r = Parmon({"demo", "--ranks", "1"}, 30);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--ranks"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace parmon::testing
