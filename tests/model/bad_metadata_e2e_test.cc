// A trace whose session metadata holds bad values (a SESSION cpus that is not a number, an END
// lost_by_location that is not a list): info, dump and report say so in one sentence, read the
// bad values as absent, and still show every event (issue 10: no exception, nothing lost).
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "format/kinds.h"
#include "format/writer.h"
#include "support/e2e.h"

namespace parmon::testing {
namespace {

using format::Event;
using format::Kind;
using format::Source;

constexpr const char* kSentence =
    "bad session metadata: 'cpus' is not a number ('x'), 'lost_by_location' has a bad item "
    "('garbage'); they are read as absent";

// One thread entering and leaving a region kEvents/2 times.
constexpr int kEvents = 40;

void WriteBadTrace(const std::string& path) {
  auto w = format::TraceWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE((*w)->WriteSession({{"command", "bad-metadata"},
                                  {"host", "h"},
                                  {"start_ts", "1000"},
                                  {"clock_base", "monotonic"},
                                  {"cpus", "x"}})
                  .ok());
  format::StreamEncoder defs(0, Source::kDefinitions);
  Event name;
  name.kind = static_cast<uint16_t>(Kind::kDefString);
  name.nargs = 2;
  name.args[0] = 7;
  name.args[1] = static_cast<uint64_t>(format::StringCategory::kRegion);
  name.payload = "work";
  defs.Append(name);
  Event loc;
  loc.kind = static_cast<uint16_t>(Kind::kDefLocation);
  loc.nargs = 4;
  loc.args[0] = 1;
  loc.args[1] = static_cast<uint64_t>(format::LocationType::kThread);
  loc.args[2] = 500;
  loc.args[3] = 500;
  defs.Append(loc);
  ASSERT_TRUE((*w)->Flush(&defs).ok());
  format::StreamEncoder enc(1, Source::kRuntime);
  for (int i = 0; i < kEvents; ++i)
    enc.AppendOneArg(static_cast<uint16_t>(i % 2 ? Kind::kRegionLeave : Kind::kRegionEnter),
                     2000 + 100 * i, 7);
  ASSERT_TRUE((*w)->Flush(&enc).ok());
  ASSERT_TRUE(
      (*w)->Finish({{"end_ts", "9000"}, {"exit_code", "0"}, {"lost_by_location", "garbage"}}).ok());
}

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

TEST(BadMetadataE2E, InfoDumpAndReportSayItOnceAndShowEveryEvent) {
  TempDir dir;
  std::string trace = dir.File("bad.ptrace");
  WriteBadTrace(trace);
  if (HasFatalFailure())
    return;

  RunResult info = Parmon({"info", trace});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(Count(info.out + info.err, kSentence), 1u) << info.out << info.err;
  EXPECT_NE(info.out.find(fmt::format("events      {} ", kEvents)), std::string::npos) << info.out;
  EXPECT_EQ(info.out.find("damage:"), std::string::npos) << info.out;  // not damage

  RunResult dump = Parmon({"dump", trace});
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_EQ(Count(dump.out + dump.err, kSentence), 1u) << dump.err;
  EXPECT_EQ(Count(dump.out, "RegionEnter"), kEvents / 2u) << dump.out;
  EXPECT_EQ(Count(dump.out, "RegionLeave"), kEvents / 2u) << dump.out;

  RunResult report = Parmon({"report", trace});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_EQ(Count(report.out + report.err, kSentence), 1u) << report.out << report.err;
  EXPECT_NE(report.out.find("work"), std::string::npos) << report.out;  // the region, 20 calls
}

}  // namespace
}  // namespace parmon::testing
