// MPI calls from several threads at once under MPI_THREAD_MULTIPLE (OpenMPI): every thread of
// every rank exchanges messages with its namesakes on the neighbouring ranks while the others do
// the same. The recording must lose nothing and the report must give each thread exactly the
// messages and bytes it counted itself.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>
#include <tuple>

#include "comm/comm_trace.h"
#include "support/e2e.h"

namespace parmon::testing {
namespace {

TEST(CommMpi, ThreadMultipleCountsEveryThreadsMessages) {
  constexpr int kRanks = 3, kThreads = 3, kMessages = 200;
  TempDir dir;
  RunResult run =
      Parmon({"record", "-q", "-o", dir.File("run.ptrace"), "--", "mpirun", "--allow-run-as-root",
              "--oversubscribe", "-np", std::to_string(kRanks), BinDir() + "/mpi_threads",
              std::to_string(kThreads), std::to_string(kMessages)},
             240);
  if (run.exit_code == 3 && run.err.find("not provided") != std::string::npos)
    GTEST_SKIP() << "this MPI does not provide MPI_THREAD_MULTIPLE";
  ASSERT_EQ(run.exit_code, 0) << run.err;

  // What each thread counted: tid -> (rank, sent, sent bytes, received, received bytes).
  std::map<uint32_t, std::tuple<int64_t, uint64_t, uint64_t, uint64_t, uint64_t>> want;
  std::map<std::pair<int64_t, int64_t>, std::pair<uint64_t, uint64_t>> want_pairs;
  std::istringstream in(run.out);
  std::string word;
  while (in >> word) {
    if (word == "thread") {
      int64_t rank;
      uint32_t tid;
      uint64_t s, sb, r, rb;
      in >> rank >> tid >> s >> sb >> r >> rb;
      want[tid] = {rank, s, sb, r, rb};
    } else if (word == "sent") {
      int64_t from, to;
      uint64_t n, bytes;
      in >> from >> to >> n >> bytes;
      want_pairs[{from, to}] = {n, bytes};
    }
  }
  ASSERT_EQ(want.size(), static_cast<size_t>(kRanks * kThreads)) << run.out;

  // Every send matched with its receive, per rank pair as the program counted.
  CommTrace t = LoadCommTrace(dir.File("run.ptrace"));
  ASSERT_TRUE(t.error.empty()) << t.error;
  Matching m = MatchMessages(t);
  for (const auto& p : m.problems)
    ADD_FAILURE() << p;
  EXPECT_EQ(m.pairs, want_pairs);
  EXPECT_EQ(m.matched, static_cast<size_t>(kRanks * kThreads * kMessages));

  // The report: no event lost, and each thread's own figures.
  auto rep = Parmon({"report", "--format", "json", dir.File("run.ptrace")});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  auto j = nlohmann::json::parse(rep.out, nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["summary"]["lost_events"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["summary"]["unattached_lost_events"].get<uint64_t>(), 0u);
  std::map<uint32_t, nlohmann::json> by_tid;
  for (const auto& l : j["locations"])
    if (l.contains("tid"))
      by_tid[l["tid"].get<uint32_t>()] = l;
  for (const auto& [tid, w] : want) {
    auto [rank, s, sb, r, rb] = w;
    ASSERT_TRUE(by_tid.count(tid)) << "thread " << tid << " of rank " << rank;
    const auto& l = by_tid[tid];
    EXPECT_EQ(l["messages_sent"].get<uint64_t>(), s) << tid;
    EXPECT_EQ(l["bytes_sent"].get<uint64_t>(), sb) << tid;
    EXPECT_EQ(l["messages_received"].get<uint64_t>(), r) << tid;
    EXPECT_EQ(l["bytes_received"].get<uint64_t>(), rb) << tid;
    EXPECT_EQ(l["lost_events"].get<uint64_t>(), 0u) << tid;
  }
}

}  // namespace
}  // namespace parmon::testing
