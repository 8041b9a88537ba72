// `parmon export` end to end (issue 16): real programs recorded by `parmon record`, exported, and
// read back by other tools' readers -- nlohmann::json for Chrome JSON, the python3-otf2 bindings
// (otf2_summary.py) and otf2-print for OTF2 -- checked exactly against the trace itself as
// model::Merge reads it: every region and MPI call enter and leave, every message (sender,
// receiver, tag, bytes), every collective, the thread and process names.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "export/otf2_read.h"
#include "model/merge.h"
#include "model/session.h"
#include "support/e2e.h"

namespace parmon::testing {
namespace {

using format::Kind;
using nlohmann::json;
using Message = std::tuple<int64_t, int64_t, int64_t, uint64_t>;  // rank, peer, tag, bytes

// What the trace holds, counted through the one merge.
struct Truth {
  uint64_t events = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> calls;  // name -> enters, leaves
  std::multiset<Message> sends, recvs;
  std::multiset<std::tuple<int64_t, std::string, uint64_t, uint64_t>> collectives;
  std::set<std::string> thread_names;
  // Context switches of thread locations by the state they leave the thread in (2 running,
  // 1 preempted, 0 blocked) and user counters' values, as the OTF2 metrics carry them.
  std::map<std::string, uint64_t> states;
  std::multiset<std::pair<std::string, double>> counters;
};

Truth Count(const std::string& path) {
  Truth t;
  auto opened = model::Session::Open(path);
  EXPECT_TRUE(opened.ok()) << opened.status().message();
  if (!opened.ok())
    return t;
  const model::Session& s = **opened;
  for (const auto& [id, l] : s.definitions().locations)
    if (l.type == format::LocationType::kThread && !l.name.empty())
      t.thread_names.insert(l.name);
  model::Merge merge(s);
  merge.Run([&](const format::Event& e, model::StreamIndex) {
    ++t.events;
    const std::string name = s.definitions().Name(static_cast<uint32_t>(e.args[0]));
    switch (e.kind_enum()) {
      case Kind::kRegionEnter:
      case Kind::kMpiEnter:
        ++t.calls[name].first;
        break;
      case Kind::kRegionLeave:
      case Kind::kMpiLeave:
        ++t.calls[name].second;
        break;
      case Kind::kMpiSend:
      case Kind::kMpiRecv:
        (e.kind_enum() == Kind::kMpiSend ? t.sends : t.recvs)
            .insert({s.RankOf(e.location), static_cast<int64_t>(e.args[0]),
                     static_cast<int64_t>(e.args[1]), e.args[3]});
        break;
      case Kind::kSwitchIn:
      case Kind::kSwitchOut:
        if (s.definitions().locations.count(e.location) &&
            s.definitions().locations.at(e.location).type == format::LocationType::kThread)
          ++t.states[e.kind_enum() == Kind::kSwitchIn ? "2" : e.args[1] ? "1" : "0"];
        break;
      case Kind::kCounterInt:
        t.counters.insert({name, static_cast<double>(static_cast<int64_t>(e.args[1]))});
        break;
      case Kind::kCounterDouble: {
        double v;
        std::memcpy(&v, &e.args[1], sizeof v);
        t.counters.insert({name, v});
        break;
      }
      case Kind::kMpiCollective: {
        std::string op = name.substr(4);  // MPI_Allreduce -> ALLREDUCE, as OTF2 names it
        std::transform(op.begin(), op.end(), op.begin(), ::toupper);
        if (op[0] == 'I')  // MPI_Iallreduce: OTF2 has the operation, not the call's form
          op = op.substr(1);
        t.collectives.insert({s.RankOf(e.location), op, e.args[3], e.args[4]});
        break;
      }
      default:
        break;
    }
  });
  return t;
}

int64_t RankOfGroup(const std::string& group) {  // "rank 3 (pid 99)"
  return group.rfind("rank ", 0) == 0 ? std::stoll(group.substr(5)) : -1;
}

std::string RecordThreads(const TempDir& dir) {
  std::string trace = dir.File("threads.ptrace");
  RunResult rec =
      Parmon({"record", "-q", "-o", trace, "--", BinDir() + "/threads_regions", "4", "2000"});
  EXPECT_EQ(rec.exit_code, 0) << rec.err;
  return trace;
}

std::string RecordMpi(const TempDir& dir, const std::string& pattern, int ranks) {
  std::string run = dir.File(pattern);
  RunResult rec =
      Run({"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(ranks),
           ParmonBin(), "record", "-q", "-o", run, "--", BinDir() + "/mpi_patterns", pattern},
          {}, 180);
  EXPECT_EQ(rec.exit_code, 0) << rec.err;
  return run;
}

TEST(ExportE2E, ChromeJsonHasEverySliceAndThreadName) {
  TempDir dir;
  std::string trace = RecordThreads(dir);
  Truth truth = Count(trace);
  ASSERT_EQ(truth.calls["work"].first, 4u * 2000);
  RunResult r = Parmon({"export", trace, "--format", "chrome-json", "-o", dir.File("t.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(ReadFile(dir.File("t.json")));
  std::map<std::string, uint64_t> begins, ends;
  std::set<std::string> thread_names;
  for (const json& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "B")
      ++begins[e["name"]];
    else if (ph == "E")
      ++ends[e["name"]];
    else if (ph == "M" && e["name"] == "thread_name")
      thread_names.insert(e["args"]["name"].get<std::string>());
  }
  for (const auto& [name, counts] : truth.calls) {
    EXPECT_EQ(begins[name], counts.first) << name;
    EXPECT_EQ(ends[name], counts.second) << name;
  }
  for (const std::string& n : truth.thread_names)
    EXPECT_TRUE(thread_names.count(n)) << n;
  EXPECT_TRUE(thread_names.count("worker-3"));
}

TEST(ExportE2E, CsvHasOneRowPerEvent) {
  TempDir dir;
  std::string trace = RecordThreads(dir);
  Truth truth = Count(trace);
  RunResult r = Parmon({"export", trace, "-f", "csv", "-o", dir.File("t.csv")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in(ReadFile(dir.File("t.csv")));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "time_ns,location,pid,tid,rank,thread,kind,name,args,payload");
  uint64_t rows = 0, enters = 0;
  while (std::getline(in, line)) {
    ++rows;
    if (line.find(",RegionEnter,work,") != std::string::npos)
      ++enters;
  }
  EXPECT_EQ(rows, truth.events);
  EXPECT_EQ(enters, truth.calls["work"].first);
}

TEST(ExportE2E, WindowKeepsSlicesBalanced) {
  TempDir dir;
  std::string trace = RecordThreads(dir);
  RunResult info = Parmon({"export", trace, "-f", "chrome-json", "-o", dir.File("w.json"), "--from",
                           "1us", "--to", "2ms"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  json doc = json::parse(ReadFile(dir.File("w.json")));
  std::map<uint64_t, int64_t> depth;  // per tid
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "B")
      ++depth[e["tid"].get<uint64_t>()];
    if (e["ph"] == "E") {
      ASSERT_GE(--depth[e["tid"].get<uint64_t>()], 0);
    }
  }
  for (const auto& [tid, d] : depth)
    EXPECT_EQ(d, 0) << tid;
}

TEST(ExportE2E, Otf2RegionsAndThreadsReadBackByOtf2Tools) {
  if (!HavePythonOtf2())
    GTEST_SKIP() << "needs python3-otf2 (scripts/setup.sh installs it)";
  TempDir dir;
  std::string trace = RecordThreads(dir);
  Truth truth = Count(trace);
  RunResult r = Parmon({"export", trace, "--format", "otf2", "-o", dir.File("otf2")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json sum = Otf2Summary(dir.File("otf2"));
  EXPECT_EQ(sum["enter"]["work"], truth.calls["work"].first);
  EXPECT_EQ(sum["leave"]["work"], truth.calls["work"].second);
  EXPECT_EQ(sum["backwards"], 0);
  EXPECT_EQ(sum["clock"]["resolution"], 1000000000);
  std::set<std::string> names;
  uint64_t events = 0;
  for (const json& l : sum["locations"]) {
    names.insert(l["name"].get<std::string>());
    events += l["events"].get<uint64_t>();
  }
  EXPECT_EQ(events, sum["events"].get<uint64_t>());  // the definitions count every record
  for (const std::string& n : truth.thread_names)
    EXPECT_TRUE(names.count(n)) << n;
  // otf2-print reads it too, one line per record.
  RunResult p = parmon::testing::Run({"otf2-print", dir.File("otf2") + "/traces.otf2"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  uint64_t enters = 0;
  std::istringstream in(p.out);
  std::string line;
  while (std::getline(in, line))
    enters += line.rfind("ENTER ", 0) == 0;
  EXPECT_EQ(enters, truth.calls["work"].first);
  // An archive is not overwritten.
  RunResult again = Parmon({"export", trace, "--format", "otf2", "-o", dir.File("otf2")});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already holds"), std::string::npos) << again.err;
}

// Context switches become the "thread state" metric (state and CPU), one record per switch, and
// each user counter a metric of its own with the program's values.
TEST(ExportE2E, Otf2ThreadStatesAndCountersAreMetrics) {
  if (!HavePythonOtf2())
    GTEST_SKIP() << "needs python3-otf2 (scripts/setup.sh installs it)";
  TempDir dir;
  std::string trace = RecordThreads(dir);
  Truth truth = Count(trace);
  ASSERT_GT(truth.states["2"], 0u) << "no switch recorded";
  RunResult r = Parmon({"export", trace, "--format", "otf2", "-o", dir.File("otf2")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json sum = Otf2Summary(dir.File("otf2"));
  uint64_t switches = 0;
  for (const auto& [state, n] : truth.states) {
    EXPECT_EQ(sum["states"].value(state, 0u), n) << "state " << state;
    switches += n;
  }
  EXPECT_EQ(sum["metrics"].value("thread state", 0u), switches);
  EXPECT_EQ(sum["backwards"], 0);

  const std::string counted = dir.File("counters.ptrace");
  RunResult rec = Parmon({"record", "-q", "-o", counted, "--", BinDir() + "/all_kinds"});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  Truth with_counters = Count(counted);
  ASSERT_EQ(with_counters.counters.size(), 2u);  // items = -12345, then 2.5
  r = Parmon({"export", counted, "--format", "otf2", "-o", dir.File("otf2c")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  sum = Otf2Summary(dir.File("otf2c"));
  std::multiset<std::pair<std::string, double>> counters;
  for (const json& c : sum["counters"])
    counters.insert({c[0].get<std::string>(), c[1].get<double>()});
  EXPECT_EQ(counters, with_counters.counters);
  EXPECT_EQ(counters.count({"items", -12345.0}), 1u);
  EXPECT_EQ(counters.count({"items", 2.5}), 1u);
}

// Messages and collectives of a per-rank MPI session: every one in the archive, exactly.
void CheckMpiArchive(const std::string& run, const std::string& archive) {
  Truth truth = Count(run);
  ASSERT_FALSE(truth.calls.empty());
  RunResult r = Parmon({"export", run, "--format", "otf2", "-o", archive});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json sum = Otf2Summary(archive);
  for (const auto& [name, counts] : truth.calls) {
    EXPECT_EQ(sum["enter"].value(name, 0u), counts.first) << name;
    EXPECT_EQ(sum["leave"].value(name, 0u), counts.second) << name;
  }
  EXPECT_EQ(sum["backwards"], 0);
  std::multiset<Message> sends, recvs;
  for (const json& m : sum["sends"])  // (the ring's communicator is a dup of the world's)
    sends.insert({RankOfGroup(m[0]), m[1], m[2], m[3]});
  for (const json& m : sum["recvs"])
    recvs.insert({RankOfGroup(m[0]), m[1], m[2], m[3]});
  EXPECT_EQ(sends, truth.sends);
  EXPECT_EQ(recvs, truth.recvs);
  std::multiset<std::tuple<int64_t, std::string, uint64_t, uint64_t>> colls;
  for (const json& c : sum["collectives"])
    colls.insert({RankOfGroup(c[0]), c[1], c[3], c[4]});
  EXPECT_EQ(colls, truth.collectives);
  std::set<int64_t> ranks;
  for (const json& l : sum["locations"])
    ranks.insert(RankOfGroup(l["group"]));
  EXPECT_EQ(ranks, (std::set<int64_t>{0, 1, 2}));
  // Every rank ran here: one system tree node, this host.
  std::set<std::string> nodes;
  for (const auto& [group, node] : sum["nodes"].items())
    nodes.insert(node.get<std::string>());
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_EQ(nodes, (std::set<std::string>{host}));
  RunResult p = parmon::testing::Run({"otf2-print", archive + "/traces.otf2"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
}

// A per-rank session whose files were written on several hosts (parmon-synth writes each rank's
// file as a recorder on its node would, 4 ranks per host): a system tree node per host, each
// rank's process under its own.
TEST(ExportE2E, Otf2HasASystemTreeNodePerHostOfAPerRankSession) {
  if (!HavePythonOtf2() || !Exists(BinDir() + "/parmon-synth"))
    GTEST_SKIP() << "needs python3-otf2 and parmon-synth";
  TempDir dir;
  RunResult gen =
      parmon::testing::Run({BinDir() + "/parmon-synth", "-o", dir.File("run"), "--ranks", "12",
                            "--iterations", "3", "--ranks-per-host", "4"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  RunResult r = Parmon({"export", dir.File("run"), "--format", "otf2", "-o", dir.File("otf2")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json sum = Otf2Summary(dir.File("otf2"));
  ASSERT_EQ(sum["nodes"].size(), 12u) << sum["nodes"].dump();
  for (const auto& [group, node] : sum["nodes"].items()) {
    const int64_t rank = RankOfGroup(group);
    ASSERT_GE(rank, 0) << group;
    EXPECT_EQ(node.get<std::string>(), "synth-node-" + std::to_string(rank / 4)) << group;
  }
}

TEST(ExportE2E, Otf2MessagesOfAnMpiRing) {
  if (!HavePythonOtf2() || !Exists(BinDir() + "/mpi_patterns") ||
      !Exists(LibDir() + "/libparmon_mpi.so"))
    GTEST_SKIP() << "needs python3-otf2, MPI and libparmon_mpi";
  TempDir dir;
  std::string run = RecordMpi(dir, "ring", 3);
  CheckMpiArchive(run, dir.File("ring.otf2"));
  Truth truth = Count(run);
  EXPECT_FALSE(truth.sends.empty());
  // The Chrome JSON flows: one "s" per send, one "f" per receive, every id on both ends.
  RunResult r = Parmon({"export", run, "-f", "chrome-json", "-o", dir.File("ring.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::multiset<uint64_t> s, f;
  const json doc = json::parse(ReadFile(dir.File("ring.json")));
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "s")
      s.insert(e["id"].get<uint64_t>());
    if (e["ph"] == "f")
      f.insert(e["id"].get<uint64_t>());
  }
  EXPECT_EQ(s.size(), truth.sends.size());
  EXPECT_EQ(f.size(), truth.recvs.size());
  EXPECT_EQ(s, f);
}

TEST(ExportE2E, Otf2CollectivesOfAnMpiRun) {
  if (!HavePythonOtf2() || !Exists(BinDir() + "/mpi_patterns") ||
      !Exists(LibDir() + "/libparmon_mpi.so"))
    GTEST_SKIP() << "needs python3-otf2, MPI and libparmon_mpi";
  TempDir dir;
  std::string run = RecordMpi(dir, "collectives", 3);
  Truth truth = Count(run);
  EXPECT_FALSE(truth.collectives.empty());
  CheckMpiArchive(run, dir.File("coll.otf2"));
}

TEST(ExportE2E, DamagedInputGivesOneSentence) {
  TempDir dir;
  std::string bad = dir.File("bad.ptrace");
  std::ofstream(bad) << "this is not a trace at all, just some bytes\n";
  for (const char* fmt : {"otf2", "chrome-json", "csv"}) {
    RunResult r = Parmon({"export", bad, "-f", fmt, "-o", dir.File(std::string("o.") + fmt)});
    EXPECT_EQ(r.exit_code, 1) << fmt;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // A trace cut in half: what is intact is exported, the damage named; no crash.
  std::string trace = RecordThreads(dir);
  std::string bytes = ReadFile(trace);
  std::string cut = dir.File("cut.ptrace");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  for (const char* fmt : {"otf2", "chrome-json", "csv"}) {
    RunResult r = Parmon({"export", cut, "-f", fmt, "-o", dir.File(std::string("cut.") + fmt)});
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 3) << fmt << ": " << r.err;
  }
  json doc = json::parse(ReadFile(dir.File("cut.chrome-json")));
  EXPECT_TRUE(doc["traceEvents"].is_array());
}

}  // namespace
}  // namespace parmon::testing
