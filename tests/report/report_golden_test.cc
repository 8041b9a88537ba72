// Golden tests: small traces written through the format library whose right answer is known by
// construction; every table of the report and every field of its JSON is checked against it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "analysis/compare.h"
#include "analysis/engine.h"
#include "analysis/views.h"
#include "format/reader.h"
#include "model/session.h"
#include "support/e2e.h"
#include "trace_builder.h"

namespace parmon::testing {
namespace {

using format::Kind;
using format::StringCategory;
using nlohmann::json;

constexpr uint64_t kUs = 1000;
constexpr uint32_t kSend = 1, kRecv = 2, kBarrier = 3, kCompute = 10;
constexpr uint64_t kNoRoot = UINT64_MAX;

// Two MPI ranks, 10 ms:
//  rank 0: compute 0-4 ms; MPI_Send of 1000 B to rank 1 (tag 7) 4-6.2 ms, blocked until rank 1
//          posts its receive at 6 ms (late receiver: 2 ms); compute 6.2-7; MPI_Recv 7-9.3 ms of
//          500 B from rank 1, which sends at 9 ms (late sender: 2 ms); compute 9.3-9.5;
//          MPI_Barrier 9.5-9.9 (waits 0.3 ms for rank 1); compute 9.9-10.
//  rank 1: compute 0-6 ms; MPI_Recv 6-6.2; compute 6.2-9; MPI_Send 9-9.1; compute 9.1-9.8;
//          MPI_Barrier 9.8-9.9; compute 9.9-10. 5 events lost.
void BuildMpiTrace(const std::string& path) {
  TraceBuilder b(path);
  b.Session({{"command", "golden-mpi 2"},
             {"host", "test"},
             {"start_ts", std::to_string(kT0)},
             {"cpus", "2"}});
  b.Process(100, 1, "golden-mpi");
  b.Process(200, 1, "golden-mpi");
  b.Thread(1, 100, 100, "golden-mpi");
  b.Thread(2, 200, 200, "golden-mpi");
  b.String(kSend, StringCategory::kFunction, "MPI_Send");
  b.String(kRecv, StringCategory::kFunction, "MPI_Recv");
  b.String(kBarrier, StringCategory::kFunction, "MPI_Barrier");
  b.String(kCompute, StringCategory::kRegion, "compute");
  // rank 0
  b.Ev(1, 0, Kind::kThreadBegin);
  b.Ev(1, 0, Kind::kMpiInit, {0, 2, 0});
  b.Ev(1, 0, Kind::kRegionEnter, {kCompute});
  b.Ev(1, 4 * kMs, Kind::kRegionLeave, {kCompute});
  b.Ev(1, 4 * kMs, Kind::kMpiEnter, {kSend});
  b.Ev(1, 4 * kMs, Kind::kMpiSend, {1, 7, 1, 1000, 0});
  b.Ev(1, 6200 * kUs, Kind::kMpiLeave, {kSend});
  b.Ev(1, 7 * kMs, Kind::kMpiEnter, {kRecv});
  b.Ev(1, 9300 * kUs, Kind::kMpiRecv, {1, 8, 1, 500, 0, TraceBuilder::At(7 * kMs)});
  b.Ev(1, 9300 * kUs, Kind::kMpiLeave, {kRecv});
  b.Ev(1, 9500 * kUs, Kind::kMpiEnter, {kBarrier});
  b.Ev(1, 9500 * kUs, Kind::kMpiCollective, {kBarrier, 1, kNoRoot, 0, 0, 0});
  b.Ev(1, 9900 * kUs, Kind::kMpiLeave, {kBarrier});
  b.Ev(1, 10 * kMs, Kind::kThreadEnd);
  // rank 1
  b.Ev(2, 0, Kind::kThreadBegin);
  b.Ev(2, 0, Kind::kMpiInit, {1, 2, 0});
  b.Ev(2, 6 * kMs, Kind::kMpiEnter, {kRecv});
  b.Ev(2, 6200 * kUs, Kind::kMpiRecv, {0, 7, 1, 1000, 0, TraceBuilder::At(6 * kMs)});
  b.Ev(2, 6200 * kUs, Kind::kMpiLeave, {kRecv});
  b.Ev(2, 8 * kMs, Kind::kLost, {5, TraceBuilder::At(7 * kMs)});
  b.Ev(2, 9 * kMs, Kind::kMpiEnter, {kSend});
  b.Ev(2, 9 * kMs, Kind::kMpiSend, {0, 8, 1, 500, 0});
  b.Ev(2, 9100 * kUs, Kind::kMpiLeave, {kSend});
  b.Ev(2, 9800 * kUs, Kind::kMpiEnter, {kBarrier});
  b.Ev(2, 9800 * kUs, Kind::kMpiCollective, {kBarrier, 1, kNoRoot, 0, 0, 0});
  b.Ev(2, 9900 * kUs, Kind::kMpiLeave, {kBarrier});
  b.Ev(2, 10 * kMs, Kind::kThreadEnd);
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + 10 * kMs)},
                        {"exit_code", "0"},
                        {"lost_events", "5"},
                        {"lost_by_location", "2:5;"},
                        {"recorder_cpu_ns", "1500000"},
                        {"children_cpu_ns", "20000000"}}));
}

analysis::Results AnalyzeFile(const std::string& path,
                              analysis::Options o = {},
                              model::SessionOptions so = {}) {
  auto r = model::Session::Open(path, so);
  EXPECT_TRUE(r.ok()) << r.status().message();
  auto res = analysis::Analyze(**r, o);
  EXPECT_TRUE(res.ok());
  return std::move(*res);
}

const json* FindBy(const json& arr, const char* key, const json& value) {
  for (const auto& x : arr)
    if (x.contains(key) && x[key] == value)
      return &x;
  return nullptr;
}

class MpiGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("mpi.ptrace");
    BuildMpiTrace(path_);
  }
  TempDir dir_;
  std::string path_;
};

TEST_F(MpiGolden, SummaryAndLocations) {
  analysis::Options o;
  o.interval_ns = kMs;
  o.default_event_cost_ns = 10;
  analysis::Results r = AnalyzeFile(path_, o);
  const auto& s = r.summary;
  EXPECT_EQ(s.command, "golden-mpi 2");
  EXPECT_EQ(s.duration_ns, 10 * kMs);
  EXPECT_EQ(s.processes, 2u);
  EXPECT_EQ(s.threads, 2u);
  EXPECT_EQ(s.ranks, 2u);
  EXPECT_EQ(s.cpus, 2u);
  EXPECT_EQ(s.events, 27u);
  EXPECT_EQ(s.lost_events, 5u);
  EXPECT_EQ(s.lost_by_location.at(2), 5u);
  EXPECT_EQ(s.recorder_cpu_ns, 1500000u);
  EXPECT_EQ(s.in_thread_overhead_ns, 27u * 10);
  ASSERT_EQ(r.locations.size(), 2u);
  const auto& r0 = r.locations[0];
  const auto& r1 = r.locations[1];
  EXPECT_EQ(r0.label, "rank 0");
  EXPECT_EQ(r1.label, "rank 1");
  EXPECT_EQ(r0.wall_ns, 10 * kMs);
  EXPECT_EQ(r0.mpi_ns, 2200 * kUs + 2300 * kUs + 400 * kUs);
  EXPECT_EQ(r0.mpi_calls, 3u);
  ASSERT_EQ(r0.mpi_families.size(), 2u);
  EXPECT_EQ(r0.mpi_families[0].family, "p2p");
  EXPECT_EQ(r0.mpi_families[0].ns, 4500 * kUs);
  EXPECT_EQ(r0.mpi_families[0].calls, 2u);
  EXPECT_EQ(r0.mpi_families[1].family, "collective");
  EXPECT_EQ(r0.mpi_families[1].ns, 400 * kUs);
  EXPECT_EQ(r1.mpi_ns, 400 * kUs);
  // Inferred states: MPI time is communication, the rest running.
  EXPECT_EQ(r0.state_source, "inferred");
  EXPECT_EQ(r0.states[int(analysis::State::kCommWait)], 4900 * kUs);
  EXPECT_EQ(r0.states[int(analysis::State::kRunning)], 5100 * kUs);
  EXPECT_EQ(r1.states[int(analysis::State::kRunning)], 9600 * kUs);
  EXPECT_EQ(r0.messages_sent, 1u);
  EXPECT_EQ(r0.bytes_sent, 1000u);
  EXPECT_EQ(r0.messages_received, 1u);
  EXPECT_EQ(r0.bytes_received, 500u);
  EXPECT_EQ(r1.bytes_sent, 500u);
  EXPECT_EQ(r1.bytes_received, 1000u);
  ASSERT_EQ(r0.top_regions.size(), 1u);
  EXPECT_EQ(r0.top_regions[0].name, "compute");
  EXPECT_EQ(r0.top_regions[0].count, 1u);
  EXPECT_EQ(r0.top_regions[0].inclusive_ns, 4 * kMs);
  EXPECT_EQ(r0.late_receiver_ns, 2 * kMs);
  EXPECT_EQ(r0.late_sender_ns, 2 * kMs);
  EXPECT_EQ(r0.barrier_wait_ns, 300 * kUs);
  EXPECT_EQ(r1.barrier_wait_ns, 0u);
  EXPECT_EQ(r1.lost_events, 5u);
}

TEST_F(MpiGolden, CommunicationMatrixAndWaitStates) {
  analysis::Results r = AnalyzeFile(path_);
  ASSERT_EQ(r.links.size(), 2u);
  const auto& a = r.links[0];  // rank 0 -> rank 1
  EXPECT_EQ(a.from, 0);
  EXPECT_EQ(a.to, 1);
  EXPECT_EQ(a.messages, 1u);
  EXPECT_EQ(a.bytes, 1000u);
  EXPECT_EQ(a.sender_wait_ns, 2 * kMs);
  EXPECT_EQ(a.receiver_wait_ns, 0u);
  EXPECT_EQ(a.time_ns, 2200 * kUs + 200 * kUs);
  EXPECT_EQ(a.wait_ns, 2 * kMs);
  EXPECT_EQ(a.transfer_ns, 400 * kUs);
  const auto& b = r.links[1];  // rank 1 -> rank 0
  EXPECT_EQ(b.from, 1);
  EXPECT_EQ(b.bytes, 500u);
  EXPECT_EQ(b.receiver_wait_ns, 2 * kMs);
  EXPECT_EQ(b.sender_wait_ns, 0u);
  EXPECT_EQ(b.time_ns, 100 * kUs + 2300 * kUs);
  // Wait states: per location and call.
  std::map<std::string, uint64_t> ws;
  for (const auto& w : r.wait_states)
    ws[w.pattern + "/" + w.location_label + "/" + w.call] = w.ns;
  EXPECT_EQ(ws.size(), 3u);
  EXPECT_EQ(ws["late receiver/rank 0/MPI_Send"], 2 * kMs);
  EXPECT_EQ(ws["late sender/rank 0/MPI_Recv"], 2 * kMs);
  EXPECT_EQ(ws["wait at barrier/rank 0/MPI_Barrier"], 300 * kUs);
  // Load imbalance over ranks: compute = wall - time in MPI.
  EXPECT_EQ(r.imbalance.over, "ranks");
  EXPECT_EQ(r.imbalance.max_compute_ns, 9600 * kUs);
  EXPECT_EQ(r.imbalance.min_compute_ns, 5100 * kUs);
  EXPECT_EQ(r.imbalance.mean_compute_ns, (9600 + 5100) * kUs / 2);
  EXPECT_EQ(r.imbalance.max_label, "rank 1");
  // Critical path: rank 1's computation 0-6, 6.2-9 and 9.1-9.8 (9.5 ms) reaches rank 0 through
  // the message and the barrier, which then computes 9.9-10.
  EXPECT_EQ(r.critical_path.length_ns, 9600 * kUs);
  ASSERT_EQ(r.critical_path.shares.size(), 2u);
  EXPECT_EQ(r.critical_path.shares[0].first, "rank 1");
  EXPECT_EQ(r.critical_path.shares[0].second, 9500 * kUs);
  EXPECT_EQ(r.critical_path.shares[1].second, 100 * kUs);
}

TEST_F(MpiGolden, Intervals) {
  analysis::Options o;
  o.interval_ns = kMs;
  analysis::Results r = AnalyzeFile(path_, o);
  const auto& iv = r.intervals;
  ASSERT_EQ(iv.count, 10u);
  // rank 0: running 0-4 ms, MPI 4-6.2, running 6.2-7, MPI 7-9.3, running 9.3-9.5, 9.9-10.
  const std::vector<double> want0 = {1, 1, 1, 1, 0, 0, 0.8, 0, 0, 0.3};
  for (size_t i = 0; i < 10; ++i)
    EXPECT_NEAR(iv.location_utilisation[0][i], want0[i], 1e-9) << i;
  // rank 1: MPI 6-6.2, 9-9.1, 9.8-9.9.
  const std::vector<double> want1 = {1, 1, 1, 1, 1, 1, 0.8, 1, 1, 0.8};
  for (size_t i = 0; i < 10; ++i)
    EXPECT_NEAR(iv.location_utilisation[1][i], want1[i], 1e-9) << i;
  double mean0 = 0;
  for (double x : want0)
    mean0 += x;
  mean0 /= 10;
  double var0 = 0;
  for (double x : want0)
    var0 += (x - mean0) * (x - mean0);
  EXPECT_NEAR(iv.location_mean[0], mean0, 1e-9);
  EXPECT_NEAR(iv.location_stddev[0], std::sqrt(var0 / 10), 1e-9);
  // Imbalance per interval is max - min; the worst are intervals 4, 5, 7, 8 (1.0).
  EXPECT_NEAR(iv.imbalance[4], 1.0, 1e-9);
  EXPECT_NEAR(iv.imbalance[0], 0.0, 1e-9);
  ASSERT_GE(iv.most_imbalanced.size(), 4u);
  std::set<size_t> worst(iv.most_imbalanced.begin(), iv.most_imbalanced.begin() + 4);
  EXPECT_EQ(worst, (std::set<size_t>{4, 5, 7, 8}));
  // Link rank 0 -> rank 1 is in use 4-6.2 ms (sender) and 6-6.2 (receiver, overlapping).
  EXPECT_NEAR(iv.link_utilisation[0][4], 1.0, 1e-9);
  EXPECT_NEAR(iv.link_utilisation[0][6], 0.4, 1e-9);  // 0.2 by each end
  EXPECT_EQ(iv.link_bytes[0][4], 1000u);
}

TEST_F(MpiGolden, Window) {
  analysis::Options o;
  o.from_ns = 5 * kMs;
  o.to_ns = 10 * kMs;
  analysis::Results r = AnalyzeFile(path_, o);
  EXPECT_EQ(r.summary.duration_ns, 5 * kMs);
  // The send started before the window: only its receive and the later message count.
  EXPECT_EQ(r.locations[0].mpi_ns, 2300 * kUs + 400 * kUs);
  EXPECT_EQ(r.locations[1].mpi_ns, 400 * kUs);
}

TEST_F(MpiGolden, Diagnosis) {
  analysis::Results r = AnalyzeFile(path_);
  ASSERT_FALSE(r.findings.empty());
  bool send_wait = false;
  for (const auto& f : r.findings) {
    if (f.id == "link-wait-send") {
      send_wait = true;
      EXPECT_EQ(f.time_at_stake_ns, 2 * kMs);
      EXPECT_NE(f.text.find("rank 0 waits 20% of the run sending to rank 1"), std::string::npos)
          << f.text;
      EXPECT_NE(f.text.find("rank 1 is the bottleneck, it computes 96%"), std::string::npos)
          << f.text;
    }
  }
  EXPECT_TRUE(send_wait);
  for (size_t i = 1; i < r.findings.size(); ++i)
    EXPECT_GE(r.findings[i - 1].time_at_stake_ns, r.findings[i].time_at_stake_ns);
}

TEST_F(MpiGolden, JsonCarriesEveryField) {
  RunResult run = Parmon({"report", path_, "--format", "json", "--interval", "1ms"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json j = json::parse(run.out);
  EXPECT_EQ(j["schema"], "parmon-report/1");
  const json& s = j["summary"];
  EXPECT_EQ(s["duration_ns"], 10 * kMs);
  EXPECT_EQ(s["events"], 27);
  EXPECT_EQ(s["lost_events"], 5);
  EXPECT_EQ(s["lost_by_location"]["2"], 5);
  EXPECT_EQ(s["ranks"], 2);
  EXPECT_EQ(s["overhead"]["recorder_cpu_ns"], 1500000);
  EXPECT_EQ(s["overhead"]["program_cpu_ns"], 20000000);
  const json* l0 = FindBy(j["locations"], "label", "rank 0");
  ASSERT_NE(l0, nullptr);
  EXPECT_EQ((*l0)["states_ns"]["comm_wait"], 4900 * kUs);
  EXPECT_EQ((*l0)["late_receiver_ns"], 2 * kMs);
  EXPECT_EQ((*l0)["late_sender_ns"], 2 * kMs);
  EXPECT_EQ((*l0)["barrier_wait_ns"], 300 * kUs);
  EXPECT_EQ((*l0)["top_regions"][0]["inclusive_ns"], 4 * kMs);
  EXPECT_EQ((*l0)["mpi_families"][0]["family"], "p2p");
  EXPECT_EQ((*l0)["critical_path_ns"], 100 * kUs);
  const json* link = FindBy(j["links"], "from_label", "rank 0");
  ASSERT_NE(link, nullptr);
  EXPECT_EQ((*link)["bytes"], 1000);
  EXPECT_EQ((*link)["sender_wait_ns"], 2 * kMs);
  EXPECT_EQ(j["intervals"]["count"], 10);
  EXPECT_EQ(j["intervals"]["locations"][0]["utilisation"].size(), 10u);
  EXPECT_EQ(j["intervals"]["locations"][0]["states_ns"][4][2], 1 * kMs);  // comm in 4-5 ms
  EXPECT_EQ(j["wait_states"]["critical_path"]["length_ns"], 9600 * kUs);
  EXPECT_EQ(j["wait_states"]["load_imbalance"]["max_label"], "rank 1");
  EXPECT_FALSE(j["diagnosis"].empty());
  // The imbalance (rank 1 computes most) is the same time as the waits on rank 1: it is their
  // evidence, not a finding of its own.
  ASSERT_EQ(j["diagnosis"].size(), 2u);
  EXPECT_EQ(j["diagnosis"][0]["id"], "link-wait-send");
  EXPECT_EQ(j["diagnosis"][0]["time_at_stake_ns"].get<uint64_t>(), 2 * kMs);
  EXPECT_NE(j["diagnosis"][0]["evidence"].get<std::string>().find("load imbalance"),
            std::string::npos);
  EXPECT_EQ(j["diagnosis"][1]["id"], "link-wait-receive");
  EXPECT_EQ(j["diagnosis"][1]["text"],
            "rank 0 waits 20% of the run receiving from rank 1: rank 1 sends late: it is the "
            "bottleneck, it computes 96% of the time");
  EXPECT_EQ(j["diagnosis"][0]["subjects"][3], "rank 0 -> rank 1");
  EXPECT_NEAR(j["diagnosis"][0]["percent"].get<double>(), 20.0, 1e-9);

  // Every field the JSON has is documented in docs/report-json.md, and the reverse.
  std::string doc = ReadFile(std::string(PARMON_SOURCE_DIR) + "/docs/report-json.md");
  ASSERT_FALSE(doc.empty());
  std::set<std::string> documented;
  std::regex field_re("`([a-z_0-9]+)`");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), field_re);
       it != std::sregex_iterator(); ++it)
    documented.insert((*it)[1]);
  std::set<std::string> present;
  std::function<void(const json&)> walk = [&](const json& x) {
    if (x.is_object()) {
      for (auto it = x.begin(); it != x.end(); ++it) {
        // lost_by_location is keyed by location id, not by field name.
        if (!std::all_of(it.key().begin(), it.key().end(), ::isdigit))
          present.insert(it.key());
        walk(it.value());
      }
    } else if (x.is_array()) {
      for (const auto& y : x)
        walk(y);
    }
  };
  walk(j);
  for (const auto& k : present)
    EXPECT_TRUE(documented.count(k)) << "undocumented JSON field " << k;
}

TEST_F(MpiGolden, TextTablesFitIn80Columns) {
  RunResult run = Parmon({"report", path_});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string& t = run.out;
  // Lost events at the top, before the diagnosis, with the count and where.
  size_t lost = t.find("LOST");
  ASSERT_NE(lost, std::string::npos) << t;
  EXPECT_LT(lost, t.find("Diagnosis"));
  EXPECT_NE(t.find("5 events were lost (rank 1 5)"), std::string::npos) << t;
  for (const char* section :
       {"Diagnosis", "Locations", "Communication", "Intervals", "Wait states"})
    EXPECT_NE(t.find(section), std::string::npos) << section;
  EXPECT_NE(t.find("late receiver"), std::string::npos);
  EXPECT_NE(t.find("wait at barrier"), std::string::npos);
  EXPECT_EQ(t.find("\033["), std::string::npos) << "no colour when not a terminal";
  size_t start = 0;
  while (start < t.size()) {
    size_t end = t.find('\n', start);
    std::string line = t.substr(start, end - start);
    // Columns, not bytes: the sparklines are 3-byte UTF-8 characters.
    size_t cols = 0;
    for (unsigned char c : line)
      cols += (c & 0xC0) != 0x80;
    EXPECT_LE(cols, 80u) << line;
    start = end + 1;
  }
  RunResult colored = Parmon({"report", path_, "--color", "always"});
  EXPECT_NE(colored.out.find("\033["), std::string::npos);
}

TEST_F(MpiGolden, CsvAndHtml) {
  RunResult csv = Parmon({"report", path_, "--format", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  for (const char* table :
       {"summary", "locations", "regions", "links", "intervals", "wait_states", "diagnosis"})
    EXPECT_NE(csv.out.find(std::string("# table: ") + table + "\n"), std::string::npos) << table;
  EXPECT_NE(csv.out.find("mpi,0,1,rank 0,rank 1,1,1000,2400000,2000000,400000,2000000,0\n"),
            std::string::npos)
      << csv.out;
  std::string html = dir_.File("r.html");
  RunResult h = Parmon({"report", path_, "--format", "html", "-o", html});
  ASSERT_EQ(h.exit_code, 0) << h.err;
  std::string page = ReadFile(html);
  EXPECT_NE(page.find("<html"), std::string::npos);
  EXPECT_NE(page.find("id=\"report-data\""), std::string::npos);
  EXPECT_NE(page.find("5 events were lost"), std::string::npos);
  // Self-contained: no external scripts or stylesheets.
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<link "), std::string::npos);
  bool has_charts = page.find("echarts.init") != std::string::npos;
  bool says_no_charts = page.find("id=\"no-charts\"") != std::string::npos;
  EXPECT_NE(has_charts, says_no_charts) << "either charts or a clear note that there are none";
  EXPECT_EQ(has_charts, !analysis::BundledChartLibrary().empty());
  // Without the library the page still says so clearly.
  analysis::Results r = AnalyzeFile(path_);
  std::string bare = analysis::RenderHtml(r, "");
  EXPECT_NE(bare.find("has no charts"), std::string::npos);
}

// Nonblocking and synchronous point-to-point, two ranks; times in ms, waits by construction:
//  A  rank 0 MPI_Isend (tag 1) at 1, MPI_Wait 2-5 completes it; rank 1 posts MPI_Recv at 4:
//     late receiver 2 on rank 0 in MPI_Wait (the receive was posted 2 after the wait began).
//  B  rank 1 MPI_Irecv (tag 2) at 6, MPI_Wait 7-9.2; rank 0 MPI_Send at 9: late sender 2 on
//     rank 1 in MPI_Wait (from the wait's entry, not from the post at 6).
//  C  rank 0 MPI_Ssend (tag 3) 10-13.05; rank 1 posts MPI_Recv at 13: late receiver 3.
//  D  rank 1 MPI_Irecv (tag 4) and MPI_Isend (tag 5) at 14, MPI_Waitall 14.1-17.2; rank 0
//     receives tag 5 at 15 and sends tag 4 at 17. The Waitall waits 14.1-17: 0.9 for its send's
//     receiver (late receiver), then 2 more for its receive's sender (late sender).
//  E  rank 0 MPI_Isend (tag 6) at 18, MPI_Test 18.5-18.6 (not done), MPI_Test 19-19.05 completes
//     it; rank 1 posts MPI_Recv at 19.02: late receiver 0.02 in MPI_Test.
// Every other call waits for nothing (its partner was there first).
TEST(NonblockingGolden, LateSenderAndLateReceiverInCompletionCalls) {
  TempDir dir;
  std::string path = dir.File("nb.ptrace");
  TraceBuilder b(path);
  b.Session({{"command", "nb 2"}, {"start_ts", std::to_string(kT0)}});
  b.Process(100, 1, "nb");
  b.Process(200, 1, "nb");
  b.Thread(1, 100, 100, "nb");
  b.Thread(2, 200, 200, "nb");
  enum : uint32_t { kIsend = 20, kIrecv, kWait, kWaitall, kSsend, kTest, kSnd, kRcv };
  b.String(kIsend, StringCategory::kFunction, "MPI_Isend");
  b.String(kIrecv, StringCategory::kFunction, "MPI_Irecv");
  b.String(kWait, StringCategory::kFunction, "MPI_Wait");
  b.String(kWaitall, StringCategory::kFunction, "MPI_Waitall");
  b.String(kSsend, StringCategory::kFunction, "MPI_Ssend");
  b.String(kTest, StringCategory::kFunction, "MPI_Test");
  b.String(kSnd, StringCategory::kFunction, "MPI_Send");
  b.String(kRcv, StringCategory::kFunction, "MPI_Recv");
  auto us = [](uint64_t n) { return n * kUs; };
  auto call = [&](uint32_t loc, uint32_t f, uint64_t from, uint64_t to,
                  std::vector<std::pair<Kind, std::vector<uint64_t>>> inside, bool at_end) {
    b.Ev(loc, from, Kind::kMpiEnter, {f});
    for (auto& [k, args] : inside)
      b.Ev(loc, at_end ? to : from, k, args);
    b.Ev(loc, to, Kind::kMpiLeave, {f});
  };
  auto send = [](uint64_t peer, uint64_t tag, uint64_t req) {
    return std::make_pair(Kind::kMpiSend, std::vector<uint64_t>{peer, tag, 1, 8, req});
  };
  auto recv = [](uint64_t peer, uint64_t tag, uint64_t req, uint64_t posted) {
    return std::make_pair(Kind::kMpiRecv,
                          std::vector<uint64_t>{peer, tag, 1, 8, req, TraceBuilder::At(posted)});
  };
  auto done = [](uint64_t req, uint64_t posted) {
    return std::make_pair(Kind::kMpiRequestDone,
                          std::vector<uint64_t>{req, TraceBuilder::At(posted)});
  };
  for (uint32_t r = 0; r < 2; ++r) {
    b.Ev(r + 1, 0, Kind::kThreadBegin);
    b.Ev(r + 1, 0, Kind::kMpiInit, {r, 2, 0});
  }
  // A
  call(1, kIsend, us(1000), us(1010), {send(1, 1, 11)}, false);
  call(1, kWait, us(2000), us(5000), {done(11, us(1000))}, true);
  call(2, kRcv, us(4000), us(5100), {recv(0, 1, 0, us(4000))}, true);
  // B
  call(2, kIrecv, us(6000), us(6010), {}, false);
  call(2, kWait, us(7000), us(9200), {recv(0, 2, 21, us(6000))}, true);
  call(1, kSnd, us(9000), us(9100), {send(1, 2, 0)}, false);
  // C
  call(1, kSsend, us(10000), us(13050), {send(1, 3, 0)}, false);
  call(2, kRcv, us(13000), us(13100), {recv(0, 3, 0, us(13000))}, true);
  // D
  call(2, kIrecv, us(14000), us(14005), {}, false);
  call(2, kIsend, us(14005), us(14010), {send(0, 5, 32)}, false);
  call(2, kWaitall, us(14100), us(17200), {recv(0, 4, 31, us(14000)), done(32, us(14005))}, true);
  call(1, kRcv, us(15000), us(15100), {recv(1, 5, 0, us(15000))}, true);
  call(1, kSnd, us(17000), us(17100), {send(1, 4, 0)}, false);
  // E
  call(1, kIsend, us(18000), us(18010), {send(1, 6, 41)}, false);
  call(1, kTest, us(18500), us(18600), {}, true);
  call(1, kTest, us(19000), us(19050), {done(41, us(18000))}, true);
  call(2, kRcv, us(19020), us(19060), {recv(0, 6, 0, us(19020))}, true);
  for (uint32_t r = 0; r < 2; ++r)
    b.Ev(r + 1, 20 * kMs, Kind::kThreadEnd);
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + 20 * kMs)}}));

  analysis::Results r = AnalyzeFile(path);
  ASSERT_EQ(r.locations.size(), 2u);
  const auto& r0 = r.locations[0];
  const auto& r1 = r.locations[1];
  EXPECT_EQ(r0.late_receiver_ns, us(2000 + 3000 + 20));
  EXPECT_EQ(r0.late_sender_ns, 0u);
  EXPECT_EQ(r1.late_sender_ns, us(2000 + 2000));
  EXPECT_EQ(r1.late_receiver_ns, us(900));
  std::map<std::string, std::pair<uint64_t, uint64_t>> ws;  // -> (instances, ns)
  for (const auto& w : r.wait_states)
    ws[w.pattern + "/" + w.location_label + "/" + w.call] = {w.instances, w.ns};
  using P = std::pair<uint64_t, uint64_t>;
  EXPECT_EQ(ws.size(), 6u);
  EXPECT_EQ(ws["late receiver/rank 0/MPI_Wait"], P(1, us(2000)));
  EXPECT_EQ(ws["late receiver/rank 0/MPI_Ssend"], P(1, us(3000)));
  EXPECT_EQ(ws["late receiver/rank 0/MPI_Test"], P(1, us(20)));
  EXPECT_EQ(ws["late sender/rank 1/MPI_Wait"], P(1, us(2000)));
  EXPECT_EQ(ws["late sender/rank 1/MPI_Waitall"], P(1, us(2000)));
  EXPECT_EQ(ws["late receiver/rank 1/MPI_Waitall"], P(1, us(900)));
  ASSERT_EQ(r.links.size(), 2u);
  const auto& a = r.links[0];  // rank 0 -> rank 1: A, B, C, D (tag 4), E
  EXPECT_EQ(a.messages, 5u);
  EXPECT_EQ(a.sender_wait_ns, us(2000 + 3000 + 20));
  EXPECT_EQ(a.receiver_wait_ns, us(2000 + 2000));
  EXPECT_EQ(a.wait_ns, a.sender_wait_ns + a.receiver_wait_ns);
  // Link time: the calls completing each end (a nonblocking receive from its wait's entry). D's
  // Waitall (3100) completes a message of each direction: this one gets its 2000 of waiting for
  // tag 4 and half of the 200 after the last arrival; rank 1 -> rank 0 its 900 and the other 100.
  EXPECT_EQ(a.time_ns, us(3000 + 1100 + 100 + 2200 + 3050 + 100 + 100 + 2100 + 50 + 40));
  const auto& c = r.links[1];  // rank 1 -> rank 0: D (tag 5)
  EXPECT_EQ(c.messages, 1u);
  EXPECT_EQ(c.sender_wait_ns, us(900));
  EXPECT_EQ(c.receiver_wait_ns, 0u);
  EXPECT_EQ(c.time_ns, us(900 + 100 + 100));  // the Waitall's share, rank 0's MPI_Recv
  EXPECT_EQ(c.transfer_ns, us(200));
}

// A session of one file per rank (two recorders, two hosts) whose clocks differ: rank 1's reads
// 3 ms ahead of rank 0's at the first clock sync and 3.02 ms at the last, 20.02 ms later on
// rank 1's clock (drift). Times in us; rank 1's events are written on its own clock, at times
// T = 3509 + 1001 k where its offset is 3000 + k.
//  rank 0 posts MPI_Recv (tag 1) at 3509; rank 1 sends at T = 8514 (k = 5: 5509 on rank 0's
//  clock): late sender 2000 on rank 0.
//  rank 1 posts MPI_Recv (tag 2) at T = 11517 (k = 8: 8509); rank 0 sends at 9509: late sender
//  1000 on rank 1.
// Unaligned, rank 1's send stamped 8514 comes after rank 0's receive completed at 5600 (no
// match) and its receive looks posted after rank 0's send: both late-sender times would be 0.
TEST(ClockGolden, PerRankFilesAreAlignedBeforeMatching) {
  TempDir dir;
  std::string run = dir.File("run");
  ASSERT_EQ(mkdir(run.c_str(), 0755), 0);
  const uint32_t kSnd = 30, kRcv = 31, kClockSync = 32;
  auto us = [](uint64_t n) { return n * kUs; };
  auto At = TraceBuilder::At;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    TraceBuilder b(run + "/rank-" + std::to_string(rank) + ".ptrace");
    b.Session({{"command", "skew 2"},
               {"host", rank == 0 ? "a" : "b"},
               {"start_ts", std::to_string(kT0 + rank * us(3000))},
               {"mpi_rank", std::to_string(rank)},
               {"mpi_size", "2"}});
    uint32_t pid = 100 * (rank + 1);
    b.Process(pid, 1, "skew");
    b.Thread(1, pid, pid, "skew");
    // Each rank's recorder interns strings from its own range.
    uint32_t base = rank << 20;
    b.String(base + kSnd, StringCategory::kFunction, "MPI_Send");
    b.String(base + kRcv, StringCategory::kFunction, "MPI_Recv");
    b.String(base + kClockSync, StringCategory::kFunction, "MPI_Init");
    auto call = [&](uint32_t f, uint64_t from, uint64_t to, Kind k, std::vector<uint64_t> args,
                    bool at_end) {
      b.Ev(1, from, Kind::kMpiEnter, {base + f});
      b.Ev(1, at_end ? to : from, k, std::move(args));
      b.Ev(1, to, Kind::kMpiLeave, {base + f});
    };
    if (rank == 0) {
      b.Ev(1, us(400), Kind::kMpiInit, {0, 2, 0});
      // Ping sent at 500, pong back at 520; at the end 20500 and 20520.
      b.Ev(1, us(520), Kind::kMpiClockSync, {1, 0, At(us(500)), At(us(520))});
      call(kRcv, us(3509), us(5600), Kind::kMpiRecv, {1, 1, 1, 8, 0, At(us(3509))}, true);
      call(kSnd, us(9509), us(9600), Kind::kMpiSend, {1, 2, 1, 8, 0}, false);
      b.Ev(1, us(20520), Kind::kMpiClockSync, {1, 1, At(us(20500)), At(us(20520))});
      b.Ev(1, us(21000), Kind::kThreadEnd);
      ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(At(us(21000)))}}));
    } else {
      b.Ev(1, us(3400), Kind::kMpiInit, {1, 2, 0});
      // Ping received at 3509 (509 on rank 0's clock), pong sent at 3511: offset 3000 +- 9.
      b.Ev(1, us(3511), Kind::kMpiClockSync, {0, 0, At(us(3511)), At(us(3509))});
      call(kSnd, us(8514), us(8614), Kind::kMpiSend, {0, 1, 1, 8, 0}, false);
      call(kRcv, us(11517), us(13519), Kind::kMpiRecv, {0, 2, 1, 8, 0, At(us(11517))}, true);
      // At the end: received at 23529 (20509 + 3020), answered at 23531: offset 3020.
      b.Ev(1, us(23531), Kind::kMpiClockSync, {0, 1, At(us(23531)), At(us(23529))});
      b.Ev(1, us(24000), Kind::kThreadEnd);
      ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(At(us(24000)))}}));
    }
  }
  analysis::Results r = AnalyzeFile(run);
  ASSERT_EQ(r.locations.size(), 2u);
  EXPECT_EQ(r.locations[0].label, "rank 0");
  EXPECT_EQ(r.locations[0].late_sender_ns, us(2000));
  EXPECT_EQ(r.locations[1].late_sender_ns, us(1000));
  ASSERT_EQ(r.links.size(), 2u);
  EXPECT_EQ(r.links[0].receiver_wait_ns, us(1000));  // rank 0 -> rank 1
  EXPECT_EQ(r.links[1].receiver_wait_ns, us(2000));  // rank 1 -> rank 0
  EXPECT_TRUE(r.summary.clocks_aligned);
  ASSERT_EQ(r.summary.clock_offsets.size(), 1u);
  EXPECT_EQ(r.summary.clock_offsets[0].rank, 1);
  EXPECT_EQ(r.summary.clock_offsets[0].offset_ns, 3000 * int64_t{1000});
  EXPECT_EQ(r.summary.clock_offsets[0].last_offset_ns, 3020 * int64_t{1000});
  EXPECT_EQ(r.summary.clock_offsets[0].epochs, 2u);
  // The session spans the first event to the last on rank 0's clock: rank 0's MpiInit at 400
  // (rank 1's at 3400 - 3000 too) to rank 0's end at 21000 (rank 1's, 24000 - 3020, is before).
  EXPECT_EQ(r.summary.duration_ns, us(21000 - 400));

  // Without the offsets the same trace gives the wrong answer: rank 1's receive (3 ms late on
  // rank 0's clock) starts after its send, so no late sender; rank 0's receive now comes 3 ms
  // before its send, which it still waits for (a receive before its send, EarlyReceive), and is
  // charged its whole call, 2091 us, not the 2000 us it waited.
  model::SessionOptions raw;
  raw.align_clocks = false;
  analysis::Results u = AnalyzeFile(run, {}, raw);
  EXPECT_EQ(u.locations[0].late_sender_ns, us(2091));
  EXPECT_EQ(u.locations[1].late_sender_ns, 0u);
  EXPECT_FALSE(u.summary.clocks_aligned);

  // The report's JSON says what was applied.
  RunResult j = Parmon({"report", run, "--format", "json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  json doc = json::parse(j.out);
  EXPECT_EQ(doc["summary"]["clocks_aligned"], true);
  EXPECT_EQ(doc["summary"]["clock_offsets"][0]["rank"], 1);
  EXPECT_EQ(doc["summary"]["clock_offsets"][0]["offset_ns"], 3000000);
  EXPECT_EQ(doc["summary"]["clock_offsets"][0]["last_offset_ns"], 3020000);
  EXPECT_EQ(doc["summary"]["clock_offsets"][0]["epochs"], 2);
  RunResult text = Parmon({"report", run});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("clocks     rank 1 +3.00 ms to +3.02 ms against rank 0, aligned"),
            std::string::npos)
      << text.out;
}

// Four threads sampled, each running 5 ms and runnable 5 ms of every 10 ms, on 2 CPUs busy the
// whole time: half of the thread time is queued.
TEST(SampledGolden, QueuedFoundAndCpuUtilisation) {
  TempDir dir;
  std::string path = dir.File("q.ptrace");
  TraceBuilder b(path);
  b.Session({{"command", "spin 4"}, {"start_ts", std::to_string(kT0)}, {"cpus", "2"}});
  b.Process(300, 1, "spin");
  for (uint32_t t = 0; t < 4; ++t)
    b.Thread(1 + t, 300, 301 + t, "spin");
  b.Cpu(10, 0);
  b.Cpu(11, 1);
  for (uint32_t t = 0; t < 4; ++t) {
    b.Ev(1 + t, 0, Kind::kThreadBegin);
    for (int k = 1; k <= 10; ++k)
      b.Ev(1 + t, k * 10 * kMs, Kind::kThreadStates, {5 * kMs, 5 * kMs, 0, 0, 0, 0, 0, 0}, "",
           format::Source::kSampler);
  }
  for (uint32_t c = 10; c <= 11; ++c)
    for (int k = 1; k <= 10; ++k)
      b.Ev(c, k * 10 * kMs, Kind::kCpuSample, {10 * kMs, 0, 0, 0}, "", format::Source::kSampler);
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + 100 * kMs)}}));
  analysis::Results r = AnalyzeFile(path);
  ASSERT_EQ(r.locations.size(), 6u);
  EXPECT_EQ(r.locations[0].state_source, "sampled");
  EXPECT_EQ(r.locations[0].states[int(analysis::State::kRunning)], 50 * kMs);
  EXPECT_EQ(r.locations[0].states[int(analysis::State::kRunnable)], 50 * kMs);
  EXPECT_EQ(r.locations[0].cpu_ns, 50 * kMs);
  EXPECT_EQ(r.locations[4].kind, "cpu");
  EXPECT_NEAR(r.intervals.location_mean[4], 1.0, 1e-9);
  EXPECT_NEAR(r.intervals.location_mean[0], 0.5, 1e-9);
  // The four keep both CPUs computing all the time: CPU-bound, which bounds the whole run.
  ASSERT_EQ(r.findings.size(), 2u);
  EXPECT_EQ(r.findings[0].id, "cpu-bound");
  EXPECT_EQ(r.findings[0].text,
            "the program is CPU-bound on 2 CPUs: its threads computed 100% of the CPUs' time");
  EXPECT_EQ(r.findings[0].time_at_stake_ns, 100 * kMs);
  EXPECT_EQ(r.findings[1].id, "queued");
  EXPECT_EQ(r.findings[1].text,
            "4 runnable threads on 2 CPUs: 50% of thread time is spent queued, waiting for a CPU");
  // 200 ms of thread time queued in a 100 ms run: with a CPU each, the four would each have
  // run 50 ms sooner, which is what the run's wall time could save (issue 12: never the sum).
  EXPECT_EQ(r.findings[1].time_at_stake_ns, 50 * kMs);
  EXPECT_EQ(r.findings[1].thread_time_ns, 200 * kMs);
}

// A three-stage pipeline over pipes: A -> B -> C, C is slow. A's writes block 60% of the run on
// the full pipe to B, B's 80% on the pipe to C; C reads without waiting. The bottleneck is C.
TEST(ChannelGolden, PipelineBottleneckIsTheLastStage) {
  TempDir dir;
  std::string path = dir.File("p.ptrace");
  TraceBuilder b(path);
  b.Session({{"command", "pipeline"}, {"start_ts", std::to_string(kT0)}});
  b.Thread(1, 401, 401, "stage-a");
  b.Thread(2, 402, 402, "stage-b");
  b.Thread(3, 403, 403, "stage-c");
  b.Ev(1, 0, Kind::kChanInfo, {4, 1, 9001, 0}, "pipe:[9001]");
  b.Ev(2, 0, Kind::kChanInfo, {3, 1, 9001, 0}, "pipe:[9001]");
  b.Ev(2, 0, Kind::kChanInfo, {4, 1, 9002, 0}, "pipe:[9002]");
  b.Ev(3, 0, Kind::kChanInfo, {3, 1, 9002, 0}, "pipe:[9002]");
  for (int k = 0; k < 10; ++k) {
    uint64_t t = k * 10 * kMs;
    b.Ev(1, t + 10 * kMs, Kind::kChanWrite, {4, 4096, TraceBuilder::At(t + 4 * kMs), 0});
    b.Ev(2, t + 2 * kMs, Kind::kChanRead, {3, 4096, TraceBuilder::At(t), 0});
    b.Ev(2, t + 10 * kMs, Kind::kChanWrite, {4, 4096, TraceBuilder::At(t + 2 * kMs), 0});
    b.Ev(3, t + 10 * kMs, Kind::kChanRead, {3, 4096, TraceBuilder::At(t + 10 * kMs), 0});
  }
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + 100 * kMs)}}));
  analysis::Options o;
  analysis::Results r = AnalyzeFile(path, o);
  ASSERT_EQ(r.links.size(), 2u);
  EXPECT_EQ(r.links[0].kind, "channel");
  EXPECT_EQ(r.links[0].from_label, "stage-a (401)");
  EXPECT_EQ(r.links[0].to_label, "stage-b (402)");
  EXPECT_EQ(r.links[0].bytes, 10u * 4096);
  EXPECT_EQ(r.links[0].sender_wait_ns, 60 * kMs);
  EXPECT_EQ(r.links[0].receiver_wait_ns, 20 * kMs);
  EXPECT_EQ(r.links[1].sender_wait_ns, 80 * kMs);
  ASSERT_FALSE(r.findings.empty());
  const auto& f = r.findings[0];
  EXPECT_EQ(f.id, "link-wait-send");
  EXPECT_NE(
      f.text.find("stage-b (402) waits 80% of the run sending to stage-c (403): stage-c (403) is "
                  "the bottleneck"),
      std::string::npos)
      << f.text;
  // A's wait passes along B to the same bottleneck: one finding, with A's wait as evidence.
  EXPECT_NE(f.evidence.find("stage-a (401) waits 60%"), std::string::npos) << f.evidence;
}

TEST(DiffAndScaleViews, DiffSaysWhatChanged) {
  TempDir dir;
  BuildMpiTrace(dir.File("a.ptrace"));
  RunResult run = Parmon({"diff", dir.File("a.ptrace"), dir.File("a.ptrace"), "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  json j = json::parse(run.out);
  EXPECT_EQ(j["duration_change"], 0.0);
  EXPECT_TRUE(j["findings_new"].empty());
  EXPECT_EQ(j["locations"].size(), 2u);
  RunResult text = Parmon({"diff", dir.File("a.ptrace"), dir.File("a.ptrace")});
  EXPECT_NE(text.out.find("B is the same"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace parmon::testing

namespace parmon::testing {
namespace {

// Bad input: one sentence on stderr, a non-zero exit, never a crash.
void ExpectOneSentence(const RunResult& r, const std::string& must_say) {
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(must_say), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(BadInput, NotATrace) {
  TempDir dir;
  std::string path = dir.File("notes.txt");
  std::ofstream(path) << "this is not a trace\n";
  ExpectOneSentence(Parmon({"report", path}), "is not a parmon trace");
  ExpectOneSentence(Parmon({"report", dir.File("missing.ptrace")}), "cannot open");
  // A directory is read as a session recorded per rank; this one holds none.
  ExpectOneSentence(Parmon({"report", dir.path()}), "directory");
  std::ofstream(dir.File("empty.ptrace"));
  ExpectOneSentence(Parmon({"report", dir.File("empty.ptrace")}), "is not a parmon trace");
  ExpectOneSentence(Parmon({"diff", path, path}), "is not a parmon trace");
}

TEST(BadInput, Truncated) {
  TempDir dir;
  std::string path = dir.File("t.ptrace");
  BuildMpiTrace(path);
  std::string bytes = ReadFile(path);
  ASSERT_GT(bytes.size(), 200u);
  // Cut inside the events: the END chunk and some events are gone.
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size() * 2 / 3));
  ExpectOneSentence(Parmon({"report", path}), "--partial");
  // --partial reports what is intact and says at the top that the trace is damaged.
  RunResult partial = Parmon({"report", path, "--partial"});
  EXPECT_EQ(partial.exit_code, 0) << partial.err;
  size_t damaged = partial.out.find("DAMAGED");
  ASSERT_NE(damaged, std::string::npos) << partial.out;
  EXPECT_LT(damaged, partial.out.find("Diagnosis"));
}

TEST(BadInput, UnknownVersion) {
  TempDir dir;
  std::string path = dir.File("v.ptrace");
  BuildMpiTrace(path);
  std::string bytes = ReadFile(path);
  bytes[8] = 99;  // FileHeader.version_major (little-endian u16 after the 8-byte magic)
  bytes[9] = 0;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  ExpectOneSentence(Parmon({"report", path}), "format version 99.");
}

TEST(BadInput, BadOptions) {
  TempDir dir;
  std::string path = dir.File("o.ptrace");
  BuildMpiTrace(path);
  ExpectOneSentence(Parmon({"report", path, "--from", "soon"}), "--from soon is not a duration");
  ExpectOneSentence(Parmon({"report", path, "--from", "5ms", "--to", "2ms"}), "--to must be later");
  ExpectOneSentence(Parmon({"report", path, "--interval", "0s"}),
                    "--interval 0s is not a positive");
}

}  // namespace
}  // namespace parmon::testing

namespace parmon::testing {
namespace {

// The Hathi-2 ring's logical error, by construction: rank 0 hands a word to rank 1 and waits for
// the answer from rank 3 before the next; each worker computes 2 ms per word and waits for its
// predecessor the rest of the time. Per word (e = 10 us per call, h = 0.1 ms at the master):
// rank 0 waits 2e + 3c = 6.02 ms of a 4e + 3c + h = 6.14 ms cycle.
TEST(RingGolden, SerialisedRingNamesTheMasterAndTheLastLink) {
  TempDir dir;
  std::string path = dir.File("ring.ptrace");
  TraceBuilder b(path);
  b.Session({{"command", "ring 4"}, {"start_ts", std::to_string(kT0)}});
  for (uint32_t r = 0; r < 4; ++r) {
    b.Process(500 + r, 1, "ring");
    b.Thread(r + 1, 500 + r, 500 + r, "ring");
  }
  b.String(kSend, StringCategory::kFunction, "MPI_Ssend");
  b.String(kRecv, StringCategory::kFunction, "MPI_Recv");
  const uint64_t e = 10 * kUs, c = 2 * kMs, h = 100 * kUs;
  const int words = 20;
  std::vector<uint64_t> posted(4, 0);  // when each rank entered its pending receive
  for (uint32_t r = 0; r < 4; ++r) {
    b.Ev(r + 1, 0, Kind::kMpiInit, {r, 4, 0});
    if (r > 0)
      b.Ev(r + 1, 0, Kind::kMpiEnter, {kRecv});
  }
  auto send = [&](uint32_t from, uint32_t to, uint64_t t, uint64_t tag) {
    b.Ev(from + 1, t, Kind::kMpiEnter, {kSend});
    b.Ev(from + 1, t, Kind::kMpiSend, {to, tag, 1, 64, 0});
    b.Ev(from + 1, t + e, Kind::kMpiLeave, {kSend});
  };
  auto receive = [&](uint32_t at, uint32_t from, uint64_t t, uint64_t tag) {
    b.Ev(at + 1, t, Kind::kMpiRecv, {from, tag, 1, 64, 0, TraceBuilder::At(posted[at])});
    b.Ev(at + 1, t, Kind::kMpiLeave, {kRecv});
  };
  uint64_t t = 0;
  for (int k = 0; k < words; ++k) {
    send(0, 1, t, k);
    posted[0] = t + e;
    b.Ev(1, t + e, Kind::kMpiEnter, {kRecv});
    uint64_t arrive = t + e;
    for (uint32_t w = 1; w <= 3; ++w) {
      receive(w, w - 1, arrive, k);
      uint64_t out = arrive + c;
      send(w, (w + 1) % 4, out, k);
      posted[w] = out + e;
      b.Ev(w + 1, out + e, Kind::kMpiEnter, {kRecv});
      arrive = out + e;
    }
    receive(0, 3, arrive, k);
    t = arrive + h;
  }
  for (uint32_t r = 1; r < 4; ++r)
    b.Ev(r + 1, t, Kind::kMpiLeave, {kRecv});
  b.Ev(1, t, Kind::kThreadEnd);
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + t)}}));
  analysis::Results r = AnalyzeFile(path);
  ASSERT_FALSE(r.findings.empty());
  const auto& f = r.findings[0];
  EXPECT_EQ(f.id, "serialised-cycle");
  // Every word but the first reaches rank 1 only after rank 1's previous one came back round.
  EXPECT_EQ(f.text,
            "rank 0 waits 98% of the run receiving from rank 3 before it hands out more "
            "work: 19 of its 20 messages to rank 1 were sent only after rank 1's previous output "
            "had come back round, so the work goes round rank 0 -> rank 1 -> rank 2 -> rank 3 -> "
            "rank 0 one item at a time; the extra synchronisation on link rank 3 -> rank 0 is the "
            "bottleneck");
  EXPECT_EQ(f.subjects,
            (std::vector<std::string>{"rank 0", "rank 3", "rank 0", "rank 3 -> rank 0", "rank 1"}));
  // Rank 1 waits 2e + 2c + h = 4.12 ms of every 6.14 ms word but the first.
  EXPECT_NE(f.evidence.find("rank 1 waits 64% of the run receiving work from rank 0"),
            std::string::npos)
      << f.evidence;
  EXPECT_EQ(f.time_at_stake_ns, words * (2 * e + 3 * c));
  // Closed loops per link: each worker's word k > 0 was sent after the receiver's word k - 1
  // came back round; every answer to rank 0 after rank 0's latest send (the word it answers).
  ASSERT_EQ(r.links.size(), 4u);
  for (const auto& k : r.links) {
    EXPECT_EQ(k.messages, 20u) << k.from_label;
    EXPECT_EQ(k.closed_loop_messages, k.to == 0 ? 20u : 19u) << k.from_label;
  }
  // One finding for the loop, not one per member, and no "rank 3 sends late" beside it.
  int cycles = 0;
  for (const auto& x : r.findings) {
    cycles += x.id == "serialised-cycle";
    EXPECT_NE(x.id, "link-wait-receive") << x.text;
  }
  EXPECT_EQ(cycles, 1);
}

}  // namespace
}  // namespace parmon::testing

namespace parmon::testing {
namespace {

// The fixed ring by construction: rank 0 hands word k to rank 1 at k x c (c = 1 ms) without
// waiting for its answer; each worker holds a word d = 0.9 ms and passes it on, a hop taking
// e = 10 us, so a word takes 4e + 3d = 2.74 ms round the ring and three are in flight at once.
// Rank 0 waits 2e + 3d - 2c = 0.72 ms of every 1 ms receiving from rank 3, and each worker 0.08
// ms for its next word: the waits the serialised ring shows too. But no word waited for its
// receiver's previous one to come back round, so there is no serialised cycle.
TEST(RingGolden, PipelinedRingHasNoSerialisedCycle) {
  TempDir dir;
  std::string path = dir.File("pipelined.ptrace");
  TraceBuilder b(path);
  b.Session({{"command", "ring 4"}, {"start_ts", std::to_string(kT0)}});
  for (uint32_t r = 0; r < 4; ++r) {
    b.Process(600 + r, 1, "ring");
    b.Thread(r + 1, 600 + r, 600 + r, "ring");
  }
  b.String(kSend, StringCategory::kFunction, "MPI_Send");
  b.String(kRecv, StringCategory::kFunction, "MPI_Recv");
  const uint64_t e = 10 * kUs, d = 900 * kUs, c = kMs;
  const uint64_t words = 20;
  const uint64_t end = (words + 1) * c + 4 * e + 3 * d - 2 * c;
  auto send = [&](uint32_t from, uint32_t to, uint64_t t, uint64_t tag) {
    b.Ev(from + 1, t, Kind::kMpiEnter, {kSend});
    b.Ev(from + 1, t, Kind::kMpiSend, {to, tag, 1, 64, 0});
    b.Ev(from + 1, t + e, Kind::kMpiLeave, {kSend});
  };
  auto receive = [&](uint32_t at, uint32_t from, uint64_t posted, uint64_t t, uint64_t tag) {
    b.Ev(at + 1, posted, Kind::kMpiEnter, {kRecv});
    b.Ev(at + 1, t, Kind::kMpiRecv, {from, tag, 1, 64, 0, TraceBuilder::At(posted)});
    b.Ev(at + 1, t, Kind::kMpiLeave, {kRecv});
  };
  // Rank 0: word k at k c, then the answer to word k - 2, which arrives at k c + 0.74 ms.
  b.Ev(1, 0, Kind::kMpiInit, {0, 4, 0});
  for (uint64_t k = 0; k < words + 2; ++k) {
    uint64_t posted = k * c;
    if (k < words) {
      send(0, 1, k * c, k);
      posted += e;
    }
    if (k >= 2)
      receive(0, 3, posted, (k - 2) * c + 4 * e + 3 * d, k - 2);
  }
  b.Ev(1, end, Kind::kThreadEnd);
  // Worker w receives word k at k c + w e + (w - 1) d and sends it on d later.
  for (uint32_t w = 1; w <= 3; ++w) {
    b.Ev(w + 1, 0, Kind::kMpiInit, {w, 4, 0});
    uint64_t posted = 0;
    for (uint64_t k = 0; k < words; ++k) {
      uint64_t at = k * c + w * e + (w - 1) * d;
      receive(w, w - 1, posted, at, k);
      send(w, (w + 1) % 4, at + d, k);
      posted = at + d + e;
    }
    b.Ev(w + 1, end, Kind::kThreadEnd);
  }
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + end)}}));
  analysis::Results r = AnalyzeFile(path);
  // The waits are there: rank 0 on rank 3 (e longer for the last two answers, when it has no
  // word to send first), rank 1 on rank 0 (every word but the first)...
  std::map<std::string, const analysis::LinkResult*> link;
  for (const auto& k : r.links)
    link[k.from_label + ">" + k.to_label] = &k;
  ASSERT_EQ(link.size(), 4u);
  EXPECT_EQ(link["rank 3>rank 0"]->receiver_wait_ns, words * (2 * e + 3 * d - 2 * c) + 2 * e);
  EXPECT_EQ(link["rank 0>rank 1"]->receiver_wait_ns, (words - 1) * (c - d - 2 * e));
  // ... but only the answer to the last word closed a loop: rank 0 had sent nothing since it.
  EXPECT_EQ(link["rank 0>rank 1"]->closed_loop_messages, 0u);
  EXPECT_EQ(link["rank 1>rank 2"]->closed_loop_messages, 0u);
  EXPECT_EQ(link["rank 2>rank 3"]->closed_loop_messages, 0u);
  EXPECT_EQ(link["rank 3>rank 0"]->closed_loop_messages, 1u);
  for (const auto& f : r.findings)
    EXPECT_NE(f.id, "serialised-cycle") << f.text;
}

// A self-scheduling farm: rank 0 gives each of three workers a task and gives a worker its next
// task when its answer is back, every P = 4 ms; a task takes C = 3 ms. Every task after a
// worker's first waited for that worker's previous answer, and rank 0 waits most of the time,
// but each loop has two parties (rank 0 and one worker): no serialised cycle.
TEST(RingGolden, SelfSchedulingFarmIsNoSerialisedCycle) {
  TempDir dir;
  std::string path = dir.File("farm.ptrace");
  TraceBuilder b(path);
  b.Session({{"command", "farm 4"}, {"start_ts", std::to_string(kT0)}});
  for (uint32_t r = 0; r < 4; ++r) {
    b.Process(700 + r, 1, "farm");
    b.Thread(r + 1, 700 + r, 700 + r, "farm");
    b.Ev(r + 1, 0, Kind::kMpiInit, {r, 4, 0});
  }
  b.String(kSend, StringCategory::kFunction, "MPI_Send");
  b.String(kRecv, StringCategory::kFunction, "MPI_Recv");
  const uint64_t e = 10 * kUs, cost = 3 * kMs, period = 4 * kMs;
  const uint64_t rounds = 10;
  std::vector<uint64_t> posted(4, 0);
  for (uint64_t k = 0; k < rounds; ++k) {
    uint64_t t = k * period;
    for (uint32_t w = 1; w <= 3; ++w) {
      b.Ev(1, t + (w - 1) * e, Kind::kMpiEnter, {kSend});
      b.Ev(1, t + (w - 1) * e, Kind::kMpiSend, {w, 1, 1, 64, 0});
      b.Ev(1, t + w * e, Kind::kMpiLeave, {kSend});
      // The worker receives its task, computes, answers and waits for the next.
      b.Ev(w + 1, posted[w], Kind::kMpiEnter, {kRecv});
      b.Ev(w + 1, t + w * e, Kind::kMpiRecv, {0, 1, 1, 64, 0, TraceBuilder::At(posted[w])});
      b.Ev(w + 1, t + w * e, Kind::kMpiLeave, {kRecv});
      b.Ev(w + 1, t + w * e + cost, Kind::kMpiEnter, {kSend});
      b.Ev(w + 1, t + w * e + cost, Kind::kMpiSend, {0, 2, 1, 64, 0});
      b.Ev(w + 1, t + (w + 1) * e + cost, Kind::kMpiLeave, {kSend});
      posted[w] = t + (w + 1) * e + cost;
    }
    for (uint32_t w = 1; w <= 3; ++w) {
      uint64_t from = w == 1 ? t + 3 * e : t + w * e + cost;
      b.Ev(1, from, Kind::kMpiEnter, {kRecv});
      b.Ev(1, t + (w + 1) * e + cost, Kind::kMpiRecv, {w, 2, 1, 64, 0, TraceBuilder::At(from)});
      b.Ev(1, t + (w + 1) * e + cost, Kind::kMpiLeave, {kRecv});
    }
  }
  for (uint32_t r = 0; r < 4; ++r)
    b.Ev(r + 1, rounds * period, Kind::kThreadEnd);
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + rounds * period)}}));
  analysis::Results r = AnalyzeFile(path);
  ASSERT_EQ(r.links.size(), 6u);
  for (const auto& k : r.links) {
    if (k.from == 0) {  // every task after the first came after the worker's previous answer
      EXPECT_EQ(k.closed_loop_messages, rounds - 1) << k.to_label;
    }
    if (k.to == 0) {  // rank 0 waits for rank 1's answer from the moment it has handed out work
      EXPECT_EQ(k.receiver_wait_ns, k.from == 1 ? rounds * (cost - 2 * e) : 0u) << k.from_label;
    }
  }
  for (const auto& f : r.findings)
    EXPECT_NE(f.id, "serialised-cycle") << f.text;
}

// The pipe form of the serialised ring: the master writes a word to worker-1 and reads its
// answer from worker-2 before the next; each worker reads, computes c = 2 ms and writes on (a
// call takes e = 10 us). Worker-2's writes return only after the master has read the answer and
// written the next word (the woken reader ran first, as on a busy machine): the events come in
// that order, and the read still takes the clock of the write it read. The loop is found from
// the channels' reads and writes alone.
TEST(RingGolden, SerialisedPipeRingNamesTheMasterAndTheLastLink) {
  TempDir dir;
  std::string path = dir.File("pipes.ptrace");
  TraceBuilder b(path);
  b.Session({{"command", "pipes"}, {"start_ts", std::to_string(kT0)}});
  const char* names[3] = {"master", "worker-1", "worker-2"};
  for (uint32_t p = 0; p < 3; ++p) {
    b.Thread(p + 1, 801 + p, 801 + p, names[p]);
    // fd 4 writes pipe 9100 + p to the next process, fd 3 reads the previous one's.
    uint64_t out = 9100 + p, in = 9100 + (p + 2) % 3;
    b.Ev(p + 1, 0, Kind::kChanInfo, {4, 1, out, 0}, "pipe:[" + std::to_string(out) + "]");
    b.Ev(p + 1, 0, Kind::kChanInfo, {3, 1, in, 0}, "pipe:[" + std::to_string(in) + "]");
  }
  const uint64_t e = 10 * kUs, c = 2 * kMs, h = 100 * kUs;
  const uint64_t words = 20;
  std::vector<uint64_t> read_from(3, 0);  // when each one's pending read began
  uint64_t t = 0;
  for (uint64_t k = 0; k < words; ++k) {
    b.Ev(1, t + e, Kind::kChanWrite, {4, 152, TraceBuilder::At(t), 0});
    read_from[0] = t + e;
    uint64_t arrive = t + 2 * e;
    for (uint32_t w = 1; w <= 2; ++w) {
      b.Ev(w + 1, arrive, Kind::kChanRead, {3, 152, TraceBuilder::At(read_from[w]), 0});
      uint64_t out = arrive + c;
      uint64_t returns = w == 1 ? out + e : out + 4 * e + h;
      b.Ev(w + 1, returns, Kind::kChanWrite, {4, 152, TraceBuilder::At(out), 0});
      read_from[w] = returns;
      arrive = out + 2 * e;
    }
    b.Ev(1, arrive, Kind::kChanRead, {3, 152, TraceBuilder::At(read_from[0]), 0});
    t = arrive + h;
  }
  for (uint32_t p = 0; p < 3; ++p)
    b.Ev(p + 1, t, Kind::kThreadEnd);
  ASSERT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + t)}}));
  analysis::Results r = AnalyzeFile(path);
  ASSERT_EQ(r.links.size(), 3u);
  for (const auto& k : r.links) {
    EXPECT_EQ(k.kind, "channel");
    EXPECT_EQ(k.messages, words);
    // Worker-1's word k > 0 and worker-2's answer k > 0 waited for the receiver's previous
    // output; every answer to the master came after the master's latest write. Only k = 1 is
    // not seen: the master read answer 0 before any write to its pipe had been seen, so that
    // read took its clock only once the write's event came, after word 1 had left.
    EXPECT_EQ(k.closed_loop_messages, k.to_label == "master (801)" ? words : words - 2)
        << k.from_label;
  }
  const analysis::Finding* f = nullptr;
  for (const auto& x : r.findings)
    if (x.id == "serialised-cycle")
      f = &x;
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->subjects,
            (std::vector<std::string>{"master (801)", "worker-2 (803)", "master (801)",
                                      "worker-2 (803) -> master (801)", "worker-1 (802)"}));
  EXPECT_NE(f->text.find("18 of its 20 messages to worker-1 (802) were sent only after"),
            std::string::npos)
      << f->text;
  // The master waits 2c + 5e of every 2c + 6e + h (98%).
  EXPECT_EQ(f->time_at_stake_ns, words * (2 * c + 5 * e));
}

}  // namespace
}  // namespace parmon::testing
