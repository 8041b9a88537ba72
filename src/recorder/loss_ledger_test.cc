// The loss ledger: totals and the END record's "loc:n;" list.
#include "recorder/loss_ledger.h"

#include <gtest/gtest.h>

#include "format/session_info.h"

namespace parmon::recorder {
namespace {

TEST(LossLedger, EmptyLedger) {
  LossLedger l;
  EXPECT_EQ(l.total(), 0u);
  EXPECT_EQ(format::EncodeLostByLocation(l.by_location()), "");
  EXPECT_EQ(l.of(7), 0u);
}

TEST(LossLedger, SumsPerLocationInLocationOrder) {
  LossLedger l;
  l.Add(5, 3);
  l.Add(2, 10);
  l.Add(5, 4);
  EXPECT_EQ(l.total(), 17u);
  EXPECT_EQ(l.of(5), 7u);
  EXPECT_EQ(format::EncodeLostByLocation(l.by_location()), "2:10;5:7;");
}

TEST(LossLedger, ZeroStillNamesTheLocation) {
  LossLedger l;
  l.Add(9, 0);
  EXPECT_EQ(l.total(), 0u);
  EXPECT_EQ(format::EncodeLostByLocation(l.by_location()), "9:0;");
}

}  // namespace
}  // namespace parmon::recorder
