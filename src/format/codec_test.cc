// EventDecoder has two paths: a fast one without per-varint bound checks while at least
// kFastBytes of payload remain, and the checked one for the tail. These tests decode the same
// events through both (a long payload whose events are met far from its end, then near it) and
// check that malformed input fails the same way on either path.
#include "format/codec.h"

#include <gtest/gtest.h>

#include <vector>

#include "format/kinds.h"

namespace parmon::format {
namespace {

// Events with every arg count, 1- to 10-byte varints, payloads and a backwards timestamp.
std::vector<Event> SampleEvents() {
  std::vector<Event> v;
  uint64_t ts = 1000;
  const uint64_t values[] = {0, 1, 127, 128, 16383, 16384, 1ull << 35, UINT64_MAX};
  for (int i = 0; i < 40; ++i) {
    Event e;
    ts += (i % 7 == 3) ? 1ull << 40 : 13;
    e.ts = i == 20 ? ts - 5000 : ts;
    e.kind = static_cast<uint16_t>(i % 3 == 0   ? Kind::kThreadStates
                                   : i % 3 == 1 ? Kind::kRegionEnter
                                                : Kind::kDefString);
    e.nargs = GetKindInfo(e.kind).nargs;
    for (int a = 0; a < e.nargs; ++a)
      e.args[a] = values[(i + a) % 8];
    if (GetKindInfo(e.kind).has_payload)
      e.payload = i % 2 ? "abc" : "";
    v.push_back(e);
  }
  return v;
}

TEST(EventDecoder, FastAndCheckedPathsDecodeTheSame) {
  std::vector<Event> in = SampleEvents();
  StreamEncoder enc(3, Source::kRuntime);
  for (const auto& e : in)
    enc.Append(e);
  KindSchema schema;
  // Events more than kFastBytes before the end take the fast path, the last ones the checked
  // path: both must give back what was encoded.
  EventDecoder d(enc.bytes().data(), enc.bytes().size(), 3, Source::kRuntime, &schema);
  Event out;
  size_t n = 0;
  while (d.Next(&out)) {
    ASSERT_LT(n, in.size());
    SCOPED_TRACE(DescribeEvent(in[n]));
    EXPECT_EQ(out.kind, in[n].kind);
    EXPECT_EQ(out.ts, in[n].ts);
    ASSERT_EQ(out.nargs, in[n].nargs);
    for (int a = 0; a < out.nargs; ++a)
      EXPECT_EQ(out.args[a], in[n].args[a]);
    EXPECT_EQ(out.payload, in[n].payload);
    EXPECT_EQ(out.location, 3u);
    ++n;
  }
  EXPECT_TRUE(d.error().empty()) << d.error();
  EXPECT_EQ(n, in.size());
  ASSERT_GT(enc.bytes().size(), 4u * 110);  // several events were decoded on the fast path
}

TEST(EventDecoder, OverlongVarintFailsOnBothPaths) {
  KindSchema schema;
  for (size_t tail : {size_t{0}, size_t{200}}) {
    // RegionEnter whose arg is 11 continuation bytes, followed by `tail` bytes of padding (so
    // the fast path reads it when tail is large).
    std::vector<uint8_t> raw = {static_cast<uint8_t>(Kind::kRegionEnter), 2};
    raw.insert(raw.end(), 11, 0x80);
    raw.push_back(1);
    raw.insert(raw.end(), tail, 0);
    EventDecoder d(raw.data(), raw.size(), 1, Source::kRuntime, &schema);
    Event e;
    EXPECT_FALSE(d.Next(&e));
    EXPECT_NE(d.error().find("event args truncated at byte 0"), std::string::npos)
        << "tail " << tail << ": " << d.error();
    EXPECT_FALSE(d.Next(&e));  // the decoder stays at the end after a failure
  }
}

TEST(EventDecoder, PayloadLongerThanTheChunkFailsOnTheFastPath) {
  KindSchema schema;
  std::vector<uint8_t> raw = {static_cast<uint8_t>(Kind::kDefString), 0, 1, 1};
  uint8_t* p = nullptr;
  uint8_t len[kMaxVarintBytes];
  p = PutVarint(len, 1000);
  raw.insert(raw.end(), len, p);
  raw.insert(raw.end(), 200, 'x');  // 200 bytes: fast path, but fewer than 1000
  EventDecoder d(raw.data(), raw.size(), 1, Source::kRuntime, &schema);
  Event e;
  EXPECT_FALSE(d.Next(&e));
  EXPECT_NE(d.error().find("event payload truncated"), std::string::npos) << d.error();
}

}  // namespace
}  // namespace parmon::format

namespace parmon::format {
namespace {

// The recorder's runs of compact events (OneArgAppender) must write exactly what AppendOneArg
// writes, with the same count and first/last times, across runs, an event appended between them
// and a time that goes backwards.
TEST(OneArgAppender, WritesWhatAppendOneArgWrites) {
  StreamEncoder one(7, Source::kRuntime), runs(7, Source::kRuntime);
  const uint16_t enter = static_cast<uint16_t>(Kind::kRegionEnter);
  const uint16_t leave = static_cast<uint16_t>(Kind::kRegionLeave);
  uint64_t ts = 5000;
  for (int r = 0; r < 3; ++r) {
    OneArgAppender run(&runs, 100);
    for (int i = 0; i < 100; ++i) {
      ts += (i == 50 && r == 1) ? -3000 : (i % 9) * 1000 + 1;
      const uint64_t arg = i % 2 ? 1 : uint64_t{1} << (i % 33);
      one.AppendOneArg(i % 2 ? leave : enter, ts, arg);
      run.Put(i % 2 ? leave : enter, ts, arg);
    }
    EXPECT_EQ(run.Done(), 100u);
    Event e;
    e.kind = static_cast<uint16_t>(Kind::kThreadStates);
    e.ts = ts;
    e.nargs = GetKindInfo(e.kind).nargs;
    one.Append(e);
    runs.Append(e);
  }
  OneArgAppender empty(&runs, 10);
  EXPECT_EQ(empty.Done(), 0u);
  ASSERT_EQ(one.raw_size(), runs.raw_size());
  EXPECT_EQ(0, std::memcmp(one.bytes().data(), runs.bytes().data(), one.raw_size()));
  EXPECT_EQ(one.count(), runs.count());
  EXPECT_EQ(one.first_ts(), runs.first_ts());
  EXPECT_EQ(one.last_ts(), runs.last_ts());
}

// An idle stream's buffer is given back (the recorder keeps an encoder per thread that ever ran)
// and the encoder writes the same bytes as a fresh one afterwards.
TEST(StreamEncoder, ResetAndReleaseFreesTheBufferAndEncodesAsNew) {
  StreamEncoder used(3, Source::kRuntime), fresh(3, Source::kRuntime);
  const uint16_t enter = static_cast<uint16_t>(Kind::kRegionEnter);
  for (uint64_t i = 0; i < 100000; ++i)
    used.AppendOneArg(enter, 1000 + i, i);
  EXPECT_GE(used.bytes().capacity(), used.raw_size());
  EXPECT_GT(used.bytes().capacity(), 256u << 10);
  used.ResetAndRelease();
  EXPECT_EQ(used.bytes().capacity(), 0u);
  EXPECT_EQ(used.count(), 0u);
  for (uint64_t i = 0; i < 10; ++i) {
    used.AppendOneArg(enter, 50 + i, i);
    fresh.AppendOneArg(enter, 50 + i, i);
  }
  ASSERT_EQ(used.raw_size(), fresh.raw_size());
  EXPECT_EQ(0, std::memcmp(used.bytes().data(), fresh.bytes().data(), used.raw_size()));
  EXPECT_EQ(used.first_ts(), fresh.first_ts());
  EXPECT_EQ(used.count(), 10u);
}

}  // namespace
}  // namespace parmon::format
