// Exporters on traces built by hand (tests/report/trace_builder.h), whose right answer is known
// by construction: nesting repaired inside a window, a thread's time stepping back, peers
// translated into ranks of their communicator, damage in the middle of the file.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "export/export.h"
#include "export/otf2_read.h"
#include "model/session.h"
#include "report/trace_builder.h"
#include "support/e2e.h"

namespace parmon::testing {
namespace {

using format::Kind;
using nlohmann::json;
constexpr uint64_t kUs = 1000;

// Two ranks (world 0 on pid 100, world 2 on pid 200 of 3): a communicator {2, 0}, one message
// on it; on rank 0 regions A > B, C with a window cutting A's enter and C's leave; one event of
// rank 2 stepping back 5 ns.
std::string Build(const TempDir& dir) {
  std::string path = dir.File("s.ptrace");
  TraceBuilder b(path);
  b.Session({{"command", "synthetic"}, {"host", "test"}, {"start_ts", std::to_string(kT0)}});
  b.Process(100, 1, "synthetic");
  b.Process(200, 1, "synthetic");
  b.Thread(1, 100, 100, "main-0");
  b.Thread(2, 200, 200, "main-2");
  b.String(10, format::StringCategory::kRegion, "A");
  b.String(11, format::StringCategory::kRegion, "B");
  b.String(12, format::StringCategory::kRegion, "C");
  b.String(20, format::StringCategory::kFunction, "MPI_Send");
  b.String(21, format::StringCategory::kFunction, "MPI_Recv");
  const uint64_t comm = (uint64_t{3} << 32) | 1;
  b.Ev(1, 0, Kind::kMpiInit, {0, 3, 0});
  b.Ev(2, 0, Kind::kMpiInit, {2, 3, 0});
  const std::string members("\x02\0\0\0\0\0\0\0", 8);  // world ranks 2, 0
  b.Ev(2, 10 * kUs, Kind::kMpiCommDef, {comm, 2, 0}, members);
  b.Ev(1, 1000 * kUs, Kind::kRegionEnter, {10});  // A: before the window
  b.Ev(1, 2000 * kUs, Kind::kRegionEnter, {11});  // B
  b.Ev(1, 2100 * kUs, Kind::kMpiEnter, {20});
  b.Ev(1, 2200 * kUs, Kind::kMpiSend, {2, 7, comm, 64, 0});
  b.Ev(1, 2300 * kUs, Kind::kMpiLeave, {20});
  b.Ev(1, 3000 * kUs, Kind::kRegionLeave, {11});
  b.Ev(1, 4000 * kUs, Kind::kRegionEnter, {12});  // C: never left
  b.Ev(1, 5000 * kUs, Kind::kRegionLeave, {10});  // A's leave: its enter is not exported
  b.Ev(2, 2050 * kUs, Kind::kMpiEnter, {21});
  b.Ev(2, 2400 * kUs, Kind::kMpiRecv, {0, 7, comm, 64, 0, kT0 + 2050 * kUs});
  b.Ev(2, 2400 * kUs - 5, Kind::kMpiLeave, {21});  // 5 ns before the receive
  EXPECT_TRUE(b.Finish({{"end_ts", std::to_string(kT0 + 6000 * kUs)}}));
  return path;
}

exporter::ExportOptions Window() {
  exporter::ExportOptions o;
  o.from_ns = 1500 * kUs;
  o.to_ns = 5500 * kUs;
  return o;
}

TEST(ExportSynthetic, ChromeJsonWindowIsWellNested) {
  TempDir dir;
  auto session = model::Session::Open(Build(dir));
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto stats = exporter::ExportChromeJson(**session, Window(), dir.File("w.json"));
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  json doc = json::parse(ReadFile(dir.File("w.json")));
  std::map<std::string, int> b, e;
  for (const json& ev : doc["traceEvents"]) {
    if (ev["ph"] == "B")
      ++b[ev["name"]];
    if (ev["ph"] == "E")
      ++e[ev["name"]];
  }
  EXPECT_EQ(b, (std::map<std::string, int>{{"B", 1}, {"C", 1}, {"MPI_Send", 1}, {"MPI_Recv", 1}}));
  EXPECT_EQ(e, b);  // A's leave dropped, C closed at the end
}

TEST(ExportSynthetic, Otf2PeersAreCommunicatorRanksAndTimesNeverStepBack) {
  if (!HavePythonOtf2())
    GTEST_SKIP() << "needs python3-otf2";
  TempDir dir;
  auto session = model::Session::Open(Build(dir));
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto stats = exporter::ExportOtf2(**session, Window(), dir.File("o"));
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  json sum = Otf2Summary(dir.File("o"));
  EXPECT_EQ(sum["enter"], json({{"B", 1}, {"C", 1}, {"MPI_Send", 1}, {"MPI_Recv", 1}}));
  EXPECT_EQ(sum["leave"], sum["enter"]);
  EXPECT_EQ(sum["backwards"], 0);
  // World rank 2 is rank 0 of the communicator, world rank 0 its rank 1.
  ASSERT_EQ(sum["sends"].size(), 1u);
  EXPECT_EQ(sum["sends"][0][1], 0);
  EXPECT_EQ(sum["sends"][0][2], 7);
  EXPECT_EQ(sum["sends"][0][3], 64);
  ASSERT_EQ(sum["recvs"].size(), 1u);
  EXPECT_EQ(sum["recvs"][0][1], 1);
  EXPECT_EQ(sum["clock"]["offset"], kT0 + 2000 * kUs);  // the first exported record
  std::set<std::string> groups;
  for (const json& l : sum["locations"])
    groups.insert(l["group"].get<std::string>());
  EXPECT_EQ(groups, (std::set<std::string>{"rank 0 (pid 100)", "rank 2 (pid 200)"}));
}

TEST(ExportSynthetic, CsvOfTheWindow) {
  TempDir dir;
  auto session = model::Session::Open(Build(dir));
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto stats = exporter::ExportCsv(**session, Window(), dir.File("w.csv"));
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  // Inside [1.5 ms, 5.5 ms]: 7 events of rank 0 (B's enter to A's leave), 3 of rank 2.
  EXPECT_EQ(stats->events_read, 10u);
  EXPECT_EQ(stats->records_written, 10u);
  std::string csv = ReadFile(dir.File("w.csv"));
  EXPECT_NE(csv.find(",MpiSend,,peer=2 tag=7 comm=12884901889 bytes=64 request=0,"),
            std::string::npos)
      << csv;
}

}  // namespace
}  // namespace parmon::testing
