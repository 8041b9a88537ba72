// The generator's truth on runs small enough to reason about by hand, and its files as the reader
// sees them: one shared kind table for every rank file (issue 19), ranks in order whatever order
// the files are given in, and every event written read back.
#include "synth/halo_session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "format/codec.h"
#include "format/reader.h"
#include "support/e2e.h"

namespace parmon::synth {
namespace {

using parmon::testing::TempDir;

TEST(HaloSession, OneLateRankMakesItsTwoNeighboursWaitByItsDelay) {
  HaloOptions o;
  o.ranks = 8;
  o.iterations = 1;
  o.late_every = 0;
  o.late.push_back({3, 0, 1000000});
  auto t = SimulateHalo(o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  // Rank 2 waits for rank 3's leftward send (4 calls after its compute, against rank 2's
  // Waitall 8 calls after its own); rank 4 for its rightward one (6 calls after).
  EXPECT_EQ(t->late_sender_ns[2], 1000000u - 400);
  EXPECT_EQ(t->late_sender_ns[4], 1000000u - 200);
  EXPECT_EQ(t->total_late_sender_ns, 2000000u - 600);
  EXPECT_EQ(t->total_messages, 16u);
}

TEST(HaloSession, NoLateRankNoWait) {
  HaloOptions o;
  o.ranks = 6;
  o.iterations = 20;
  o.late_every = 0;
  auto t = SimulateHalo(o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->total_late_sender_ns, 0u);
}

TEST(HaloSession, RefusesWhatIsNotAHaloExchange) {
  HaloOptions o;
  o.ranks = 1;
  EXPECT_FALSE(SimulateHalo(o).ok());
  o.ranks = 4;
  o.ranks_per_host = 0;
  EXPECT_FALSE(SimulateHalo(o).ok());
  o.ranks_per_host = 2;
  o.iterations = 0;
  TempDir dir;
  EXPECT_FALSE(WriteHaloSession(dir.path() + "/run", o).ok());
}

TEST(HaloSession, RankFilesShareOneKindTableAndReadBackWhole) {
  TempDir dir;
  const std::string run = dir.path() + "/run";
  HaloOptions o;
  o.ranks = 6;
  o.iterations = 30;
  o.ranks_per_host = 2;
  auto t = WriteHaloSession(run, o);
  ASSERT_TRUE(t.ok()) << t.status().message();
  // Given in reverse order, with the directory of none of them: read in rank order.
  std::vector<std::string> files;
  for (int k = 5; k >= 0; --k)
    files.push_back(run + "/rank-" + std::to_string(k) + ".ptrace");
  auto r = format::TraceReader::Open(files);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ((*r)->parts().size(), 6u);
  for (size_t k = 0; k < 6; ++k)
    EXPECT_EQ((*r)->parts()[k], run + "/rank-" + std::to_string(k) + ".ptrace");
  EXPECT_EQ(&(*r)->schema(), format::KindSchema::Builtin().get());
  EXPECT_EQ((*r)->total_events(), t->events);
  EXPECT_TRUE((*r)->closed_cleanly());
  EXPECT_TRUE((*r)->problems().empty());
  // A single file's reader shares the table too.
  auto one = format::TraceReader::Open(files.front());
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(&(*one)->schema(), format::KindSchema::Builtin().get());
}

TEST(HaloSession, SeveralInputsNeedFilesToRead) {
  TempDir dir;
  EXPECT_FALSE(format::TraceReader::Open(std::vector<std::string>{}).ok());
  const std::string empty = dir.path() + "/empty";
  std::filesystem::create_directory(empty);
  auto r = format::TraceReader::Open(std::vector<std::string>{empty, empty});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("without .ptrace files"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace parmon::synth
