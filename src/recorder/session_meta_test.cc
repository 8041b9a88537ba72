// SESSION and END key/values: the keys readers look up, in order, with the facts given.
#include "recorder/session_meta.h"

#include <gtest/gtest.h>

#include <map>

namespace parmon::recorder {
namespace {

std::map<std::string, std::string> AsMap(const KeyValues& kv) {
  return {kv.begin(), kv.end()};
}

TEST(SessionMeta, SessionValuesQuoteArgumentsWithSpaces) {
  TickConversion clock;
  SessionFacts f;
  f.argv = {"./app", "two words", "-x"};
  f.clock = &clock;
  f.overflow = shm::Overflow::kOverwrite;
  f.ring_bytes = 131072;
  f.ring_count = 8;
  f.extra = {{"mode", "periodic"}};
  KeyValues kv = SessionValues(f);
  auto m = AsMap(kv);
  EXPECT_EQ(m["command"], "./app 'two words' -x");
  EXPECT_EQ(m["overflow"], "overwrite");
  EXPECT_EQ(m["ring_bytes"], "131072");
  EXPECT_EQ(m["ring_count"], "8");
  EXPECT_EQ(kv.front().first, "parmon_version");
  EXPECT_EQ(kv.back(), (std::pair<std::string, std::string>{"mode", "periodic"}));
}

TEST(SessionMeta, EndValuesCarryTheTotals) {
  EndFacts f;
  f.end_ns = 99;
  f.exit_code = 3;
  f.lost = 12;
  f.lost_by_location = {{1, 12}};
  f.overwritten = 5;
  f.extra = {{"sampler_passes", "4"}};
  KeyValues kv = EndValues(f);
  auto m = AsMap(kv);
  EXPECT_EQ(m["end_ts"], "99");
  EXPECT_EQ(m["exit_code"], "3");
  EXPECT_EQ(m["lost_events"], "12");
  EXPECT_EQ(m["lost_by_location"], "1:12;");
  EXPECT_EQ(m["overwritten_events"], "5");
  EXPECT_EQ(kv.back().first, "sampler_passes");
}

}  // namespace
}  // namespace parmon::recorder
