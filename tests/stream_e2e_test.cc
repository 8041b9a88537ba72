// Chunk streams end to end: `parmon info|dump|report -` read a trace from a pipe and print what
// they print for the file; a FIFO without a writer says what parmon waits for; a report taken on
// the growing file of a running recording is the report of a prefix of the final run.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "support/e2e.h"

namespace parmon {
namespace {

using nlohmann::json;
using testing::BinDir;
using testing::Parmon;
using testing::ParmonBin;

using testing::TempDir;

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// The output of `cat trace | parmon args... -`, with "-" standing for the path.
testing::RunResult ThroughPipe(const std::string& trace, const std::string& args) {
  return testing::Run({"sh", "-c", "cat '" + trace + "' | '" + ParmonBin() + "' " + args + " -"});
}

TEST(StreamE2e, StdinReadsLikeTheFile) {
  TempDir dir;
  std::string trace = dir.File("run.ptrace");
  ASSERT_EQ(Parmon({"record", "-q", "-o", trace, "--", BinDir() + "/threads_regions", "3", "20000"})
                .exit_code,
            0);
  for (const std::string cmd : {"report", "info", "dump"}) {
    auto file = Parmon({cmd, trace});
    auto pipe = ThroughPipe(trace, cmd);
    ASSERT_EQ(file.exit_code, 0) << cmd << ": " << file.err;
    ASSERT_EQ(pipe.exit_code, 0) << cmd << ": " << pipe.err;
    EXPECT_GT(file.out.size(), 100u) << cmd;
    // The path is the only difference: the file's name, or "-".
    EXPECT_EQ(Replace(file.out, trace, "-"), pipe.out) << cmd;
  }
  // diff with one side from standard input: the same as with both files.
  auto diff_file = Parmon({"diff", trace, trace});
  auto diff_pipe = ThroughPipe(trace, "diff '" + trace + "'");
  ASSERT_EQ(diff_file.exit_code, 0) << diff_file.err;
  EXPECT_EQ(diff_pipe.exit_code, 0) << diff_pipe.err;
  EXPECT_EQ(Replace(diff_file.out, trace, "-"), Replace(diff_pipe.out, trace, "-"));
  auto json_file = Parmon({"report", "--format", "json", trace});
  auto json_pipe = ThroughPipe(trace, "report --format json");
  EXPECT_EQ(Replace(json_file.out, trace, "-"), json_pipe.out);
}

TEST(StreamE2e, CutPipeReportsIntactChunksAndOneSentence) {
  TempDir dir;
  std::string trace = dir.File("run.ptrace");
  ASSERT_EQ(
      Parmon({"record", "-q", "-o", trace, "--", BinDir() + "/threads_regions", "2", "200000"})
          .exit_code,
      0);
  const auto size = std::filesystem::file_size(trace);
  auto r = testing::Run(
      {"sh", "-c",
       "head -c " + std::to_string(size / 2) + " '" + trace + "' | '" + ParmonBin() + "' info -"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(testing::Unwrapped(r.out).find("the trace was not closed"), std::string::npos) << r.out;
  auto d = testing::Run(
      {"sh", "-c",
       "head -c " + std::to_string(size / 2) + " '" + trace + "' | '" + ParmonBin() + "' dump -"});
  EXPECT_GT(std::count(d.out.begin(), d.out.end(), '\n'), 1000) << d.err;
}

TEST(StreamE2e, FifoWithoutWriterSaysWhatItWaitsForAndCtrlCEndsIt) {
  TempDir dir;
  std::string fifo = dir.File("trace.fifo");
  ASSERT_EQ(testing::Run({"mkfifo", fifo}).exit_code, 0);
  // timeout sends SIGINT (Ctrl-C) after 1.5 s, then reports 124.
  auto r = testing::Run({"timeout", "-s", "INT", "1.5", ParmonBin(), "info", fifo}, {}, 30);
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_NE(r.err.find("parmon: waiting for a writer on FIFO " + fifo + " (Ctrl-C to stop)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  // With a writer, the FIFO is read like the file.
  std::string trace = dir.File("run.ptrace");
  ASSERT_EQ(Parmon({"record", "-q", "-o", trace, "--", BinDir() + "/threads_regions", "1", "100"})
                .exit_code,
            0);
  auto via_fifo = testing::Run({"sh", "-c",
                                "sleep 0.5; cat '" + trace + "' > '" + fifo + "' & '" +
                                    ParmonBin() + "' info '" + fifo + "'; wait"});
  EXPECT_EQ(via_fifo.exit_code, 0) << via_fifo.err;
  EXPECT_NE(via_fifo.out.find("events"), std::string::npos) << via_fifo.out;
}

// Counts that depend only on the events in the window: equal for a prefix of the run.
void ExpectPrefixCounts(const json& live, const json& final_run) {
  EXPECT_EQ(live["summary"]["events"], final_run["summary"]["events"]);
  EXPECT_EQ(live["summary"]["threads"], final_run["summary"]["threads"]);
  ASSERT_EQ(live["locations"].size(), final_run["locations"].size());
  for (size_t i = 0; i < live["locations"].size(); ++i) {
    const json& a = live["locations"][i];
    const json& b = final_run["locations"][i];
    EXPECT_EQ(a["id"], b["id"]);
    EXPECT_EQ(a["events"], b["events"]) << a["label"];
    EXPECT_EQ(a["messages_sent"], b["messages_sent"]) << a["label"];
    EXPECT_EQ(a["messages_received"], b["messages_received"]) << a["label"];
    ASSERT_EQ(a["top_regions"].size(), b["top_regions"].size()) << a["label"];
    for (size_t k = 0; k < a["top_regions"].size(); ++k) {
      EXPECT_EQ(a["top_regions"][k]["name"], b["top_regions"][k]["name"]);
      EXPECT_EQ(a["top_regions"][k]["count"], b["top_regions"][k]["count"]);
    }
  }
}

TEST(StreamE2e, ReportOnTheGrowingFileIsAPrefixOfTheFinalReport) {
  TempDir dir;
  std::string trace = dir.File("run.ptrace");
  // Regions first, then ~1 s of threads that sleep, spin and wait (sampler and switches).
  const std::string program = "'" + BinDir() +
                              "/threads_regions' 2 50000 > /dev/null; sleep 0.3; '" + BinDir() +
                              "/duty_cycle' --seconds 1.2 basic > /dev/null";
  testing::RunResult record;
  std::thread recorder([&] {
    record = Parmon({"record", "-q", "-o", trace, "--", "sh", "-c", program});
  });
  // Reports while it runs, until one covers the first program's regions (on a busy machine the
  // first watermarks can come before it has started: a report then covers the shell alone).
  auto regions_in = [](const json& report) {
    size_t n = 0;
    for (const auto& l : report["locations"])
      n += l["top_regions"].size();
    return n;
  };
  json live;
  std::string live_err;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto r = Parmon({"report", "--format", "json", trace});
    if (r.exit_code != 0 || r.err.find("is not closed") == std::string::npos)
      continue;
    live = json::parse(r.out, nullptr, false);
    live_err = r.err;
    if (!live.is_discarded() && live["summary"]["events"].get<uint64_t>() > 0 &&
        regions_in(live) > 0)
      break;
  }
  recorder.join();
  ASSERT_EQ(record.exit_code, 0) << record.err;
  ASSERT_FALSE(live.is_null()) << "no report of the growing file covered any events";
  EXPECT_EQ(std::count(live_err.begin(), live_err.end(), '\n'), 1) << live_err;
  EXPECT_FALSE(live["summary"]["closed_cleanly"].get<bool>());
  const uint64_t covered = live["summary"]["window_end_ns"];
  auto r = Parmon({"report", "--format", "json", "--to", std::to_string(covered) + "ns", trace});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json final_run = json::parse(r.out);
  EXPECT_TRUE(final_run["summary"]["closed_cleanly"].get<bool>());
  EXPECT_EQ(final_run["summary"]["window_end_ns"], covered);
  ExpectPrefixCounts(live, final_run);
  // The live report saw the regions of the first program (1.5 s before the run ends), so the
  // comparison above covered region counts too.
  EXPECT_GT(regions_in(live), 0u) << "no report of the growing file covered the regions";
  EXPECT_LT(live["summary"]["events"].get<uint64_t>(),
            json::parse(Parmon({"report", "--format", "json", trace}).out)["summary"]["events"]
                .get<uint64_t>());
}

}  // namespace
}  // namespace parmon

namespace parmon {
namespace {

// An endless device is not a trace: parmon says so from its first bytes instead of copying it
// until the disk is full (issue 13: no hang or runaway memory on any input).
TEST(StreamE2e, EndlessDeviceIsNotReadToItsEnd) {
  for (const std::string device : {"/dev/zero", "/dev/urandom"}) {
    auto r = testing::Run({"timeout", "60", testing::ParmonBin(), "info", device});
    EXPECT_EQ(r.exit_code, 1) << device << ": " << r.err;
    EXPECT_NE(r.err.find(device + " is not a parmon trace"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace parmon
