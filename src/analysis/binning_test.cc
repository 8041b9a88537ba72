// The interval-binning helper: clipping to the window, splitting across interval boundaries, a
// shorter last interval.
#include "analysis/binning.h"

#include <gtest/gtest.h>

#include <vector>

namespace parmon::analysis {
namespace {

TEST(Bins, CountsIntervalsWithAShorterLastOne) {
  Bins b = Bins::Of(100, 350, 100);
  EXPECT_EQ(b.count, 3u);
  EXPECT_EQ(b.Begin(2), 300u);
  EXPECT_EQ(b.End(2), 350u);
  EXPECT_EQ(b.Span(2), 50u);
  EXPECT_EQ(Bins::Of(100, 100, 100).count, 1u);  // an empty window keeps one interval
}

TEST(Bins, SplitsAcrossBoundariesAndClipsToTheWindow) {
  Bins b = Bins::Of(100, 350, 100);
  std::vector<uint64_t> row(b.count, 0);
  auto add = [&](size_t i, uint64_t ns) { row[i] += ns; };
  b.Split(150, 320, add);
  EXPECT_EQ(row, (std::vector<uint64_t>{50, 100, 20}));
  b.Split(0, 120, add);    // starts before the window
  b.Split(340, 900, add);  // ends after it
  EXPECT_EQ(row, (std::vector<uint64_t>{70, 100, 30}));
  b.Split(400, 500, add);  // outside
  b.Split(200, 200, add);  // empty
  EXPECT_EQ(row, (std::vector<uint64_t>{70, 100, 30}));
}

TEST(Bins, IntervalOfAndClip) {
  Bins b = Bins::Of(100, 350, 100);
  EXPECT_EQ(b.IntervalOf(50), 0u);
  EXPECT_EQ(b.IntervalOf(199), 0u);
  EXPECT_EQ(b.IntervalOf(200), 1u);
  EXPECT_EQ(b.IntervalOf(1000), 2u);
  EXPECT_EQ(b.Clip(50, 150), 50u);
  EXPECT_EQ(b.Clip(300, 400), 50u);
  EXPECT_EQ(b.Clip(400, 500), 0u);
}

}  // namespace
}  // namespace parmon::analysis
