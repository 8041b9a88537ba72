#include "model/clock_alignment.h"

#include <gtest/gtest.h>

namespace parmon::model {
namespace {

// Rank 0 (file 0) pings rank `rank` (file `file`) at time t0 on rank 0's clock; the message takes
// `latency` ns each way and rank `rank`'s clock reads `skew` ns more than rank 0's.
void PingPong(std::vector<ClockSync>* syncs,
              uint32_t file,
              int64_t rank,
              uint64_t epoch,
              uint64_t t0,
              int64_t skew,
              uint64_t latency = 10) {
  uint64_t recv1 = t0 + latency + static_cast<uint64_t>(skew);  // on rank's clock
  uint64_t send1 = recv1 + 5;
  uint64_t recv0 = send1 - static_cast<uint64_t>(skew) + latency;  // back on rank 0's
  syncs->push_back({0, rank, epoch, t0, recv0});
  syncs->push_back({file, 0, epoch, send1, recv1});
}

TEST(ClockAlignmentTest, MeasuresTheOffsetOfAPingPong) {
  std::vector<ClockSync> syncs;
  PingPong(&syncs, 1, 1, 0, 100, 1000);
  ClockAlignment a = AlignClocks({0, 1}, syncs);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.ForFile(0), nullptr);  // rank 0 is the reference
  const ClockMap* c = a.ForFile(1);
  ASSERT_NE(c, nullptr);
  size_t hint = 0;
  EXPECT_EQ(c->Apply(5000, &hint), 4000u);
  ASSERT_EQ(a.offsets.size(), 1u);
  EXPECT_EQ(a.offsets[0].rank, 1);
  EXPECT_EQ(a.offsets[0].offset_ns, 1000);
  EXPECT_EQ(a.offsets[0].epochs, 1u);
}

TEST(ClockAlignmentTest, InterpolatesBetweenEpochsAndHoldsOutside) {
  std::vector<ClockSync> syncs;
  PingPong(&syncs, 1, 1, 0, 1000000, 1000);
  PingPong(&syncs, 1, 1, 1, 2000000, 3000);  // the clock drifted 2 us in 1 ms
  ClockAlignment a = AlignClocks({0, 1}, syncs);
  const ClockMap* c = a.ForFile(1);
  ASSERT_NE(c, nullptr);
  const uint64_t e0 = c->samples[0].first, e1 = c->samples[1].first;
  size_t hint = 0;
  EXPECT_DOUBLE_EQ(c->At(e0, &hint), 1000);
  EXPECT_DOUBLE_EQ(c->At(e1, &hint), 3000);
  EXPECT_DOUBLE_EQ(c->At((e0 + e1) / 2, &hint), 2000);  // halfway: halfway
  EXPECT_DOUBLE_EQ(c->At(0, &hint), 1000);              // before the first epoch: held
  EXPECT_DOUBLE_EQ(c->At(e1 * 10, &hint), 3000);        // after the last: held
  EXPECT_EQ(a.offsets[0].offset_ns, 1000);
  EXPECT_EQ(a.offsets[0].last_offset_ns, 3000);
  // A time before the offset is clamped at zero, never wraps.
  EXPECT_EQ(c->Apply(10, &hint), 0u);
}

TEST(ClockAlignmentTest, OffsetWithinItsUncertaintyIsNoise) {
  std::vector<ClockSync> syncs;
  // A round trip of 2 x 100 ns and an offset of 40: noise, as for ranks sharing one clock.
  PingPong(&syncs, 1, 1, 0, 1000, 40, 100);
  ClockAlignment a = AlignClocks({0, 1}, syncs);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.ForFile(1), nullptr);
  ASSERT_EQ(a.offsets.size(), 1u);  // still reported, as zero
  EXPECT_EQ(a.offsets[0].offset_ns, 0);
  // Beyond the uncertainty it is kept.
  syncs.clear();
  PingPong(&syncs, 1, 1, 0, 1000, 400, 100);
  EXPECT_FALSE(AlignClocks({0, 1}, syncs).empty());
}

TEST(ClockAlignmentTest, IgnoresUnmatchedAndUnrankedHalves) {
  std::vector<ClockSync> syncs;
  PingPong(&syncs, 1, 1, 0, 1000, 5000);
  syncs.erase(syncs.begin());  // rank 0's half lost
  EXPECT_TRUE(AlignClocks({0, 1}, syncs).offsets.empty());
  syncs.clear();
  PingPong(&syncs, 1, 1, 0, 1000, 5000);
  EXPECT_TRUE(AlignClocks({0, -1}, syncs).offsets.empty());  // file 1 has no MpiInit
  // Several ranks, sorted by rank.
  syncs.clear();
  PingPong(&syncs, 2, 1, 0, 1000, 5000);
  PingPong(&syncs, 1, 2, 0, 100000, -2000);
  ClockAlignment a = AlignClocks({0, 2, 1}, syncs);
  ASSERT_EQ(a.offsets.size(), 2u);
  EXPECT_EQ(a.offsets[0].rank, 1);
  EXPECT_EQ(a.offsets[0].offset_ns, 5000);
  EXPECT_EQ(a.offsets[1].rank, 2);
  EXPECT_EQ(a.offsets[1].offset_ns, -2000);
}

// SameOffsets compares two maps as functions up to a time: what a later round changes only after
// the last round seen so far (held constant until then) matters only for times read past it.
TEST(ClockAlignmentTest, SameOffsetsComparesTheMapsAsFunctionsUpToATime) {
  ClockMap none, one, two_same, two_drift;
  one.samples = {{1000, 50}};
  two_same.samples = {{1000, 50}, {5000, 50}};
  two_drift.samples = {{1000, 50}, {5000, 90}};
  EXPECT_TRUE(SameOffsets(none, none, UINT64_MAX));
  EXPECT_FALSE(SameOffsets(none, one, 0));  // held constant before the first round too
  EXPECT_TRUE(SameOffsets(one, two_same, UINT64_MAX));
  EXPECT_TRUE(SameOffsets(one, two_drift, 1000));   // read only up to the first round
  EXPECT_FALSE(SameOffsets(one, two_drift, 1001));  // past it: the drift moves it
  EXPECT_FALSE(SameOffsets(two_drift, one, 4000));
  size_t hint = 0;
  EXPECT_EQ(none.Apply(123456789, &hint), 123456789u);  // no rounds yet: no correction
}

}  // namespace
}  // namespace parmon::model
