// `parmon dump RUN/` of a session recorded by one recorder per MPI rank, rank 1's MPI events
// stamped 3 ms late (PARMON_MPI_CLOCK_SKEW_NS): dump must print rank 1's times on rank 0's clock,
// as `parmon report` aligns them. Unaligned, every message rank 1 sends would be received 3 ms
// before it was sent.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "support/e2e.h"

namespace parmon::testing {
namespace {

using nlohmann::json;

struct DumpLine {
  uint64_t ts = 0;
  uint32_t pid = 0;
  std::string kind;
  std::map<std::string, uint64_t> args;
};

// "<ts> [pid/tid name] Kind a=1 b=2 ..."
std::vector<DumpLine> ParseDump(const std::string& out) {
  std::vector<DumpLine> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    DumpLine d;
    std::istringstream ls(line);
    std::string where;
    ls >> d.ts >> where;
    if (where.size() < 2 || where[0] != '[')
      continue;
    d.pid = static_cast<uint32_t>(std::strtoul(where.c_str() + 1, nullptr, 10));
    std::string word;
    while (ls >> word && word.back() != ']') {
    }
    ls >> d.kind;
    while (ls >> word) {
      size_t eq = word.find('=');
      if (eq != std::string::npos && eq + 1 < word.size() && isdigit(word[eq + 1]))
        d.args[word.substr(0, eq)] = std::strtoull(word.c_str() + eq + 1, nullptr, 10);
    }
    lines.push_back(std::move(d));
  }
  return lines;
}

TEST(DumpAlignedE2E, PerRankSessionWithSkewedClockPrintsAlignedTimes) {
  std::string app = BinDir() + "/mpi_patterns";
  if (!Exists(LibDir() + "/libparmon_mpi.so") || !Exists(app))
    GTEST_SKIP() << "needs libparmon_mpi and MPI";
  TempDir dir;
  std::string run = dir.File("run");
  std::vector<std::string> argv = {"mpirun", "--allow-run-as-root", "--oversubscribe"};
  for (int rank = 0; rank < 2; ++rank) {
    if (rank > 0)
      argv.push_back(":");
    for (const char* a : {"-np", "1"})
      argv.push_back(a);
    if (rank == 1)
      for (const char* a : {"env", "PARMON_MPI_CLOCK_SKEW_NS=3000000"})
        argv.push_back(a);
    for (const std::string& a :
         {ParmonBin(), std::string("record"), std::string("-q"), std::string("-o"), run,
          std::string("--"), app, std::string("pingpong")})
      argv.push_back(a);
  }
  RunResult rec = parmon::testing::Run(argv, {}, 120);
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  ASSERT_TRUE(Exists(run + "/rank-1.ptrace")) << rec.err;

  // The skew is there: report measures it.
  RunResult rep = Parmon({"report", run, "--format", "json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  json r = json::parse(rep.out);
  ASSERT_EQ(r["summary"]["clock_offsets"].size(), 1u);
  EXPECT_NEAR(r["summary"]["clock_offsets"][0]["offset_ns"].get<double>(), 3e6, 50e3);

  RunResult dump = Parmon({"dump", "--absolute", run});
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  std::vector<DumpLine> lines = ParseDump(dump.out);
  ASSERT_FALSE(lines.empty());
  // Times agree with report's: the first event is the session's start, and times never go back.
  EXPECT_EQ(lines.front().ts, r["summary"]["session_start_ns"].get<uint64_t>());
  for (size_t i = 1; i < lines.size(); ++i)
    ASSERT_GE(lines[i].ts, lines[i - 1].ts) << "line " << i;
  // Ranks by pid, from MpiInit.
  std::map<uint32_t, uint64_t> rank_of_pid;
  for (const auto& l : lines)
    if (l.kind == "MpiInit")
      rank_of_pid[l.pid] = l.args.at("rank");
  ASSERT_EQ(rank_of_pid.size(), 2u);
  // Every message: its receive is not before its send (sends and receives of one (from, to, tag)
  // matched in order).
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, std::deque<uint64_t>> sends;
  std::vector<std::pair<std::tuple<uint64_t, uint64_t, uint64_t>, uint64_t>> recvs;
  for (const auto& l : lines) {
    if (l.kind == "MpiSend")
      sends[{rank_of_pid[l.pid], l.args.at("peer"), l.args.at("tag")}].push_back(l.ts);
    else if (l.kind == "MpiRecv")
      recvs.push_back({{l.args.at("peer"), rank_of_pid[l.pid], l.args.at("tag")}, l.ts});
  }
  size_t matched = 0, from_rank1 = 0;
  for (const auto& [key, ts] : recvs) {
    auto& q = sends[key];
    ASSERT_FALSE(q.empty()) << "a receive without its send";
    EXPECT_LE(q.front(), ts) << "receive before its send, from rank " << std::get<0>(key);
    from_rank1 += std::get<0>(key) == 1;
    q.pop_front();
    ++matched;
  }
  EXPECT_EQ(matched, 80u);  // 40 round trips
  EXPECT_EQ(from_rank1, 40u);
}

}  // namespace
}  // namespace parmon::testing
