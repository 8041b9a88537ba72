// End-to-end test of request completion (issue 10): small MPI_Isends that the MPI library
// completes inside the call come back with one shared handle (Open MPI's static empty request,
// MPICH's built-in completed request), and a completion array then holds that handle twice.
// The wrappers must still give every nonblocking send exactly one MpiRequestDone with its own
// id, and every message must still be matched with the bytes the program counted itself.
#include <gtest/gtest.h>

#include <unistd.h>

#include <iostream>
#include <map>
#include <sstream>

#include "comm/comm_trace.h"
#include "format/kinds.h"
#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"
#include "support/e2e.h"

namespace parmon::testing {
namespace {

using format::Kind;

struct ProgramCounts {
  std::map<std::pair<int64_t, int64_t>, std::pair<uint64_t, uint64_t>> pairs;
  std::map<int64_t, uint64_t> isends;       // rank -> MPI_Isend calls
  std::map<int64_t, uint64_t> same_handle;  // rank -> iterations with one handle for 2 sends
};

ProgramCounts ParseCounts(const std::string& out) {
  ProgramCounts c;
  std::istringstream in(out);
  std::string word;
  while (in >> word) {
    int64_t rank = 0, to = 0;
    uint64_t n = 0, bytes = 0;
    if (word == "sent" && in >> rank >> to >> n >> bytes)
      c.pairs[{rank, to}] = {n, bytes};
    else if (word == "isends" && in >> rank >> n)
      c.isends[rank] = n;
    else if (word == "samehandle" && in >> rank >> n)
      c.same_handle[rank] = n;
  }
  return c;
}

// Per process: the request ids of nonblocking sends and how often each id was reported done.
struct Requests {
  std::map<uint32_t, std::map<uint64_t, int>> send_ids;  // pid -> request -> MpiSend events
  std::map<uint32_t, std::map<uint64_t, int>> done_ids;  // pid -> request -> MpiRequestDone
  std::string error;
};

Requests LoadRequests(const std::string& path) {
  Requests r;
  auto reader = format::TraceReader::Open(path);
  if (!reader.ok()) {
    r.error = reader.status().message();
    return r;
  }
  std::map<uint32_t, uint32_t> pid_of_location;
  for (const auto& [id, loc] : (*reader)->definitions().locations)
    pid_of_location[id] = loc.pid;
  auto session = model::Session::Over(**reader, model::SessionOptions{});
  if (!session.ok()) {
    r.error = session.status().message();
    return r;
  }
  model::Merge cursor(**session);
  format::Event e;
  while (cursor.Next(&e)) {
    uint32_t pid = pid_of_location[e.location];
    if (e.kind_enum() == Kind::kMpiSend && e.args[4] != 0)
      r.send_ids[pid][e.args[4]] += 1;
    else if (e.kind_enum() == Kind::kMpiRequestDone)
      r.done_ids[pid][e.args[0]] += 1;
  }
  return r;
}

void CheckInlineSends(const std::vector<std::string>& launcher, const std::string& program) {
  TempDir dir;
  std::vector<std::string> args = {"record", "-q", "-o", dir.File("run.ptrace"), "--"};
  args.insert(args.end(), launcher.begin(), launcher.end());
  args.push_back(BinDir() + "/" + program);
  args.push_back("200");
  RunResult run = Parmon(args, 120);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ProgramCounts want = ParseCounts(run.out);
  ASSERT_EQ(want.isends.size(), 2u) << run.out << run.err;
  // Informational: whether this MPI shared handles at all (both Open MPI and MPICH do today).
  for (const auto& [rank, n] : want.same_handle)
    std::cout << program << " rank " << rank << ": " << n << " of 200 iterations returned one "
              << "handle for both sends\n";

  Requests req = LoadRequests(dir.File("run.ptrace"));
  ASSERT_TRUE(req.error.empty()) << req.error;
  CommTrace t = LoadCommTrace(dir.File("run.ptrace"));
  ASSERT_TRUE(t.error.empty()) << t.error;
  ASSERT_EQ(t.rank_of_pid.size(), 2u);
  for (const auto& [pid, rank] : t.rank_of_pid) {
    const auto& sends = req.send_ids[pid];
    const auto& dones = req.done_ids[pid];
    EXPECT_EQ(sends.size(), want.isends[rank]) << "rank " << rank;
    for (const auto& [id, n] : sends) {
      EXPECT_EQ(n, 1) << "rank " << rank << " request " << id << " sent twice";
      auto it = dones.find(id);
      int done = it == dones.end() ? 0 : it->second;
      EXPECT_EQ(done, 1) << "rank " << rank << " send request " << id << " completed " << done
                         << " times";
    }
    // Only sends make MpiRequestDone here (receives complete as MpiRecv).
    EXPECT_EQ(dones.size(), sends.size()) << "rank " << rank;
  }
  Matching m = MatchMessages(t);
  for (const auto& p : m.problems)
    ADD_FAILURE() << p;
  EXPECT_EQ(m.pairs, want.pairs) << run.out;
  EXPECT_EQ(m.matched, t.sends.size());
  EXPECT_EQ(m.matched, t.recvs.size());
}

TEST(CommMpiRequests, InlineSendsCompleteOnceOpenMpi) {
  if (access((BinDir() + "/mpi_isend_pairs").c_str(), X_OK) != 0)
    GTEST_SKIP() << "MPI is not installed";
  CheckInlineSends({"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"},
                   "mpi_isend_pairs");
}

TEST(CommMpiRequests, InlineSendsCompleteOnceMpich) {
  if (access((BinDir() + "/mpi_isend_pairs_mpich").c_str(), X_OK) != 0 ||
      access("/usr/bin/mpirun.mpich", X_OK) != 0)
    GTEST_SKIP() << "MPICH is not installed";
  CheckInlineSends({"mpirun.mpich", "-np", "2"}, "mpi_isend_pairs_mpich");
}

}  // namespace
}  // namespace parmon::testing
