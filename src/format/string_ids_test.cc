// Per-rank string-id ranges (string_ids.h): disjoint for every rank of a job up to 524,288
// ranks, all below 2^31, and the same as before for jobs of up to 2,048 ranks.
#include "format/string_ids.h"

#include <gtest/gtest.h>

namespace parmon::format {
namespace {

TEST(RankStringIds, JobsUpTo2048RanksKeepTheirMegaRange) {
  EXPECT_EQ(RankStringIdSpan(1), 1u << 20);
  EXPECT_EQ(RankStringIdSpan(2048), 1u << 20);
  EXPECT_EQ(RankFirstStringId(0, 4), 1u);
  EXPECT_EQ(RankFirstStringId(3, 4), 1u + 3 * (1u << 20));
  EXPECT_EQ(RankFirstStringId(2047, 2048), 1u + 2047 * (1u << 20));
  EXPECT_EQ(RankFirstStringId(5, 0), RankFirstStringId(5, 2048));
}

TEST(RankStringIds, EveryRankOfABigJobHasItsOwnRangeBelowTheRuntimesIds) {
  for (uint32_t size : {2049u, 4096u, 5000u, 65536u, 100000u, 524288u}) {
    const uint32_t span = RankStringIdSpan(size);
    EXPECT_GE(span, kRankStringIdsMin) << size;
    for (uint32_t rank : {0u, 1u, 2048u, size / 2, size - 2, size - 1}) {
      const uint32_t first = RankFirstStringId(rank, size);
      EXPECT_EQ(first, 1 + rank * span) << size << " " << rank;  // no wrap: disjoint ranges
      EXPECT_LE(static_cast<uint64_t>(first) + span - 1, kRankStringIdsEnd) << size << " " << rank;
    }
  }
  // Ranks K and K + 2048 no longer share a range in a 4,096-rank job.
  EXPECT_NE(RankFirstStringId(7, 4096), RankFirstStringId(7 + 2048, 4096));
}

TEST(RankStringIds, BeyondTheSmallestRangeRanksWrap) {
  const uint32_t size = 1u << 20;
  EXPECT_EQ(RankStringIdSpan(size), kRankStringIdsMin);
  EXPECT_EQ(RankFirstStringId(kRankStringIdsEnd / kRankStringIdsMin, size), 1u);
}

}  // namespace
}  // namespace parmon::format
