#include "format/session_info.h"

#include <gtest/gtest.h>

namespace parmon::format {
namespace {

std::map<std::string, std::string> ToMap(const KeyValues& a, const KeyValues& b = {}) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : a)
    m[k] = v;
  for (const auto& [k, v] : b)
    m[k] = v;
  return m;
}

TEST(SessionInfoTest, RoundTripKeepsEveryValueAndUnknownKeys) {
  SessionInfo s;
  s.parmon_version = "0.1.0";
  s.command = "mpirun -np 2 ./app 'a b'";
  s.host = "node7";
  s.start_realtime_ns = 1700000000123456789ull;
  s.start_ts = 42;
  s.clock = "perf clock";
  s.clock_base = "perf";
  s.recorder_pid = 1234;
  s.overflow = "drop";
  s.ring_bytes = 1 << 20;
  s.ring_count = 64;
  s.cpus = 8;
  s.sample_period_ns = 10000000;
  s.mode = "full";
  s.mpi_rank = 0;  // zero is a rank, not absence
  s.mpi_size = 4;
  s.extra = {{"launcher", "openmpi"}, {"zz_future_key", "v:1;2"}};
  EndInfo e;
  e.end_ts = 99999;
  e.exit_code = 0;
  e.lost_events = 7;
  e.lost_by_location = {{1, 3}, {5, 4}};
  e.overwritten_events = 11;
  e.unattached_lost_events = 2;
  e.ring_corruptions = 1;
  e.recorder_cpu_ns = 123;
  e.children_cpu_ns = 456;
  e.event_cost_ns = 17.25;
  e.sampler_passes = 10;
  e.switch_records_lost = 3;
  e.events = 1000;
  e.index_offset = 4096;
  e.stream_totals = {{{1, Source::kRuntime}, 900}, {{2, Source::kSampler}, 100}};

  auto decoded = DecodeSessionMetadata(ToMap(EncodeSession(s), EncodeEnd(e)));
  ASSERT_EQ(decoded.warning, "");
  const SessionInfo& s2 = decoded.session;
  const EndInfo& e2 = decoded.end;
  EXPECT_EQ(s2.command, s.command);
  EXPECT_EQ(s2.host, s.host);
  EXPECT_EQ(s2.start_realtime_ns, s.start_realtime_ns);
  EXPECT_EQ(s2.start_ts, 42u);
  EXPECT_EQ(s2.clock_base, "perf");
  EXPECT_EQ(s2.recorder_pid, 1234u);
  EXPECT_EQ(s2.overflow, "drop");
  EXPECT_EQ(s2.ring_bytes, 1u << 20);
  EXPECT_EQ(s2.ring_count, 64u);
  EXPECT_EQ(s2.cpus, 8u);
  EXPECT_EQ(s2.sample_period_ns, 10000000u);
  EXPECT_EQ(s2.mode, "full");
  ASSERT_TRUE(s2.mpi_rank.has_value());
  EXPECT_EQ(*s2.mpi_rank, 0);
  EXPECT_EQ(s2.mpi_size, 4u);
  EXPECT_EQ(s2.extra, s.extra);
  EXPECT_EQ(e2.end_ts, 99999u);
  ASSERT_TRUE(e2.exit_code.has_value());
  EXPECT_EQ(*e2.exit_code, 0);
  EXPECT_EQ(e2.lost_events, 7u);
  EXPECT_EQ(e2.lost_by_location, e.lost_by_location);
  EXPECT_EQ(e2.overwritten_events, 11u);
  EXPECT_EQ(e2.unattached_lost_events, 2u);
  EXPECT_EQ(e2.ring_corruptions, 1u);
  EXPECT_EQ(e2.recorder_cpu_ns, 123u);
  EXPECT_EQ(e2.children_cpu_ns, 456u);
  ASSERT_TRUE(e2.event_cost_ns.has_value());
  EXPECT_DOUBLE_EQ(*e2.event_cost_ns, 17.25);
  EXPECT_EQ(e2.sampler_passes, 10u);
  EXPECT_EQ(e2.switch_records_lost, 3u);
  EXPECT_EQ(e2.events, 1000u);
  EXPECT_EQ(e2.index_offset, 4096u);
  EXPECT_EQ(e2.stream_totals, e.stream_totals);
  // Encoding the decoded values again gives the same lists.
  EXPECT_EQ(EncodeSession(s2), EncodeSession(s));
  EXPECT_EQ(EncodeEnd(e2), EncodeEnd(e));
}

TEST(SessionInfoTest, AbsentValuesReadAsAbsent) {
  auto decoded = DecodeSessionMetadata({{"command", "x"}, {"start_realtime_ns", ""}});
  ASSERT_EQ(decoded.warning, "");
  EXPECT_EQ(decoded.session.command, "x");
  EXPECT_EQ(decoded.session.start_realtime_ns, 0u);
  EXPECT_FALSE(decoded.session.mpi_rank.has_value());
  EXPECT_FALSE(decoded.end.exit_code.has_value());
  EXPECT_FALSE(decoded.end.event_cost_ns.has_value());
  EXPECT_TRUE(decoded.end.lost_by_location.empty());
  EXPECT_TRUE(decoded.session.extra.empty());
}

// A bad value reads as absent; every bad value is named in one sentence; nothing else is lost.
bool Clean(const std::map<std::string, std::string>& kv) {
  return DecodeSessionMetadata(kv).warning.empty();
}

TEST(SessionInfoTest, BadNumberGivesOneSentence) {
  auto decoded = DecodeSessionMetadata({{"cpus", "x"}, {"host", "h"}, {"end_ts", "7"}});
  EXPECT_EQ(decoded.warning,
            "bad session metadata: 'cpus' is not a number ('x'); it is read as absent");
  EXPECT_EQ(decoded.bad_keys, std::vector<std::string>{"cpus"});
  EXPECT_EQ(decoded.session.cpus, 0u);
  EXPECT_EQ(decoded.session.host, "h");
  EXPECT_EQ(decoded.end.end_ts, 7u);
  EXPECT_FALSE(Clean({{"end_ts", "12abc"}}));
  EXPECT_EQ(DecodeSessionMetadata({{"end_ts", "12abc"}}).end.end_ts, 0u);  // not 12
  EXPECT_FALSE(Clean({{"exit_code", "-"}}));
  EXPECT_FALSE(DecodeSessionMetadata({{"exit_code", "-"}}).end.exit_code.has_value());
  EXPECT_FALSE(Clean({{"event_cost_ns", "fast"}}));
  EXPECT_FALSE(Clean({{"start_ts", "-5"}}));
  EXPECT_FALSE(Clean({{"cpus", "99999999999"}}));  // not a uint32
  EXPECT_TRUE(Clean({{"exit_code", "-11"}}));
}

TEST(SessionInfoTest, BadListItemGivesOneSentence) {
  auto decoded = DecodeSessionMetadata({{"lost_by_location", "1:2;3;"}, {"cpus", "x"}});
  EXPECT_EQ(decoded.warning,
            "bad session metadata: 'cpus' is not a number ('x'), 'lost_by_location' has a bad "
            "item ('3'); they are read as absent");
  EXPECT_TRUE(decoded.end.lost_by_location.empty());  // the whole list, not its first items
  EXPECT_FALSE(Clean({{"stream_totals", "1:2;"}}));
  EXPECT_FALSE(Clean({{"stream_totals", "1:2:3:4;"}}));
  EXPECT_FALSE(Clean({{"lost_by_location", "a:1;"}}));
  EXPECT_FALSE(Clean({{"lost_by_location", "garbage"}}));
  auto ok = DecodeSessionMetadata({{"lost_by_location", "1:2;1:3"}});
  ASSERT_EQ(ok.warning, "");
  EXPECT_EQ(ok.end.lost_by_location.at(1), 5u);  // repeated locations add up
}

}  // namespace
}  // namespace parmon::format
