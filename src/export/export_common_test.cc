// The exporters' shared pieces: nesting repair inside a window, message ids, escaping.
#include "export/export_common.h"

#include <gtest/gtest.h>

namespace parmon::exporter {
namespace {

TEST(Nesting, DropsLeavesWithoutEnterAndClosesInnerFramesFirst) {
  Nesting n;
  std::vector<uint32_t> closed;
  auto close = [&](const Frame& f) { closed.push_back(f.name); };
  EXPECT_FALSE(n.Leave(1, {7, false}, close));  // its enter lies before the window
  n.Enter(1, {1, false});
  n.Enter(1, {2, true});
  n.Enter(1, {3, false});
  EXPECT_TRUE(n.Leave(1, {2, true}, close));  // 3 left open inside 2: closed first
  EXPECT_EQ(closed, (std::vector<uint32_t>{3, 2}));
  EXPECT_FALSE(n.Leave(1, {2, false}, close));  // same id, other kind: not open
  n.Enter(2, {5, false});
  std::vector<std::pair<uint32_t, uint32_t>> rest;
  n.CloseAll([&](uint32_t loc, const Frame& f) { rest.push_back({loc, f.name}); });
  std::sort(rest.begin(), rest.end());
  EXPECT_EQ(rest, (std::vector<std::pair<uint32_t, uint32_t>>{{1, 1}, {2, 5}}));
}

TEST(MessageIds, KthSendMatchesKthReceiveOfTheSameChannel) {
  MessageIds ids;
  uint64_t s0 = ids.Send(0, 1, 1, 5), s1 = ids.Send(0, 1, 1, 5), t0 = ids.Send(0, 1, 1, 6);
  EXPECT_NE(s0, s1);
  EXPECT_NE(s0, t0);
  EXPECT_EQ(ids.Recv(0, 1, 1, 6), t0);
  EXPECT_EQ(ids.Recv(0, 1, 1, 5), s0);
  EXPECT_EQ(ids.Recv(0, 1, 1, 5), s1);
  EXPECT_LT(s0, uint64_t{1} << 53);
}

TEST(Escaping, JsonAndCsv) {
  std::string j;
  AppendJsonString(&j, "a\"b\\c\n\x01 caf\xe9");
  EXPECT_EQ(j, "\"a\\\"b\\\\c\\n\\u0001 caf\\\\xE9\"");
  std::string c;
  AppendCsvField(&c, "plain");
  c += ',';
  AppendCsvField(&c, "a,\"b\"");
  EXPECT_EQ(c, "plain,\"a,\"\"b\"\"\"");
}

}  // namespace
}  // namespace parmon::exporter
