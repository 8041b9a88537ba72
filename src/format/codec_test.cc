// EventDecoder has two paths: a fast one without per-varint bound checks while at least
// kFastBytes of payload remain, and the checked one for the tail. These tests decode the same
// events through both (a long payload whose events are met far from its end, then near it) and
// check that malformed input fails the same way on either path.
#include "format/codec.h"

#include <gtest/gtest.h>

#include <string>
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

// What one encoder's bytes decode to (every event exactly), and the decoder's error if any.
std::vector<Event> DecodeAll(const StreamEncoder& enc, std::string* error = nullptr) {
  KindSchema schema;
  std::vector<Event> out;
  std::string err;
  DecodeEvents(enc.bytes().data(), enc.bytes().size(), enc.location(), enc.source(), schema, &out,
               &err);
  if (error)
    *error = err;
  else
    EXPECT_TRUE(err.empty()) << err;
  return out;
}

void ExpectSameEvents(const std::vector<Event>& got, const std::vector<Event>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    bool same = got[i].kind == want[i].kind && got[i].ts == want[i].ts &&
                got[i].nargs == want[i].nargs && got[i].payload == want[i].payload;
    for (int a = 0; same && a < want[i].nargs; ++a)
      same = got[i].args[a] == want[i].args[a];
    if (!same) {
      ADD_FAILURE() << "event " << i << ": got " << DescribeEvent(got[i]) << ", want "
                    << DescribeEvent(want[i]);
      return;
    }
  }
}

Event OneArg(Kind kind, uint64_t ts, uint64_t arg) {
  Event e;
  e.kind = static_cast<uint16_t>(kind);
  e.ts = ts;
  e.nargs = 1;
  e.args[0] = arg;
  return e;
}

// The recorder's runs of compact events (OneArgAppender) decode to exactly the events put, with
// the same count and first/last times as AppendOneArg gives: alternating enters and leaves and a
// repeated marker (repeat runs, one byte each), gaps of 127 and 128 ns, a time that goes
// backwards, large args, runs that continue from one appender to the next, and events appended
// between them.
TEST(OneArgAppender, DecodesToEveryEventPut) {
  StreamEncoder one(7, Source::kRuntime), runs(7, Source::kRuntime);
  std::vector<Event> want;
  uint64_t ts = 5000;
  for (int r = 0; r < 4; ++r) {
    OneArgAppender run(&runs, 300);
    for (int i = 0; i < 300; ++i) {
      const int phase = i / 100;  // enter/leave pairs, a marker repeated, then varied
      uint64_t gap = phase == 2 ? (i % 9) * 40 + 1 : 10 + (i % 3);
      if (i == 37)
        gap = 127;
      if (i == 38)
        gap = 128;
      if (i == 250 && r == 1)
        gap = uint64_t(-3000);  // backwards
      ts += gap;
      const Kind kind =
          phase == 1 ? Kind::kMarker : (i % 2 ? Kind::kRegionLeave : Kind::kRegionEnter);
      const uint64_t arg = phase == 2 ? (uint64_t{1} << (i % 50)) : 3 + r % 2;
      want.push_back(OneArg(kind, ts, arg));
      one.AppendOneArg(static_cast<uint16_t>(kind), ts, arg);
      run.Put(static_cast<uint16_t>(kind), ts, arg);
    }
    EXPECT_EQ(run.Done(), 300u);
    if (r == 2) {  // r = 3's runs continue r = 2's: no event between them
      continue;
    }
    Event e;
    e.kind = static_cast<uint16_t>(Kind::kThreadStates);
    e.ts = ts;
    e.nargs = GetKindInfo(e.kind).nargs;
    one.Append(e);
    runs.Append(e);
    want.push_back(e);
  }
  OneArgAppender empty(&runs, 10);
  EXPECT_EQ(empty.Done(), 0u);
  ExpectSameEvents(DecodeAll(runs), want);
  ExpectSameEvents(DecodeAll(one), want);
  EXPECT_EQ(one.count(), runs.count());
  EXPECT_EQ(one.first_ts(), runs.first_ts());
  EXPECT_EQ(one.last_ts(), runs.last_ts());
  // Two thirds of the events (800) repeat one of the two before them within 127 ns: one byte
  // each instead of three.
  EXPECT_GE(one.raw_size(), runs.raw_size() + 800 * 18 / 10) << runs.raw_size();
}

// A tight loop's enters and leaves take a byte each, across a chunk's flush (Reset) and past the
// largest count a run holds (2^21 - 1), and each chunk decodes alone.
TEST(OneArgAppender, LongRunsAndChunkCutsDecodeExactly) {
  StreamEncoder enc(2, Source::kRuntime);
  // The i-th event of the loop, and its time after `ts`.
  auto kind_of = [](uint32_t i) { return i % 2 ? Kind::kRegionLeave : Kind::kRegionEnter; };
  auto gap_of = [](uint32_t i) { return uint64_t{9} + (i % 5 == 0); };
  const uint32_t kEvents = (1u << 21) + 1000;
  uint64_t ts = 1;
  for (uint32_t done = 0; done < kEvents;) {
    OneArgAppender run(&enc, 1024);
    for (int i = 0; i < 1024 && done < kEvents; ++i, ++done) {
      ts += gap_of(done);
      run.Put(static_cast<uint16_t>(kind_of(done)), ts, 42);
    }
    run.Done();
  }
  EXPECT_LT(enc.raw_size(), size_t{kEvents} + 64);
  KindSchema schema;
  EventDecoder d(enc.bytes().data(), enc.bytes().size(), 2, Source::kRuntime, &schema);
  Event e;
  uint32_t n = 0;
  uint64_t want_ts = 1;
  for (; d.Next(&e); ++n) {
    want_ts += gap_of(n);
    if (e.kind != static_cast<uint16_t>(kind_of(n)) || e.ts != want_ts || e.nargs != 1 ||
        e.args[0] != 42) {
      ADD_FAILURE() << "event " << n << ": " << DescribeEvent(e);
      break;
    }
  }
  EXPECT_TRUE(d.error().empty()) << d.error();
  EXPECT_EQ(n, kEvents);
  // A chunk cut: what follows decodes alone, from its own first event.
  enc.Reset();
  std::vector<Event> want;
  for (int r = 0; r < 3; ++r) {
    OneArgAppender run(&enc, 100);
    for (int i = 0; i < 100; ++i) {
      ts += 12;
      const Kind kind = i % 2 ? Kind::kRegionLeave : Kind::kRegionEnter;
      run.Put(static_cast<uint16_t>(kind), ts, 7);
      want.push_back(OneArg(kind, ts, 7));
    }
    run.Done();
  }
  ExpectSameEvents(DecodeAll(enc), want);
  EXPECT_EQ(enc.count(), 300u);
}

// Format 2.1: compact events of kinds of several args (an MPI_Test polling loop's MpiEnter
// without its site, and MpiLeave) go into repeat runs too, and decode with the kind's number of
// args, those after the first 0, as when each is appended alone.
TEST(OneArgAppender, RunsOfKindsOfSeveralArgsDecodeWithTheirOtherArgsZero) {
  const uint16_t enter = static_cast<uint16_t>(Kind::kMpiEnter);  // func, site
  const uint16_t leave = static_cast<uint16_t>(Kind::kMpiLeave);  // func
  ASSERT_EQ(GetKindInfo(enter).nargs, 2);
  StreamEncoder runs(4, Source::kRuntime), alone(4, Source::kRuntime);
  std::vector<Event> want;
  uint64_t ts = 100;
  OneArgAppender run(&runs, 2000);
  for (int i = 0; i < 2000; ++i) {
    ts += i % 500 == 0 ? 300 : 20 + i % 7;  // now and then a gap past what a run holds
    Event e;
    e.kind = i % 2 ? leave : enter;
    e.ts = ts;
    e.nargs = GetKindInfo(e.kind).nargs;
    e.args[0] = 31;
    want.push_back(e);
    alone.Append(e);
    run.Put(e.kind, ts, 31, e.nargs - 1u);
  }
  EXPECT_EQ(run.Done(), 2000u);
  ExpectSameEvents(DecodeAll(runs), want);
  ExpectSameEvents(DecodeAll(alone), want);
  // A byte each, against four (kind, delta, func, site) alone.
  EXPECT_LT(runs.raw_size(), 2000u + 200u);
  EXPECT_GT(alone.raw_size(), 3u * 2000u);
}

// Crafted repeat runs give one sentence each, and the events before them are kept.
TEST(EventDecoder, CraftedRepeatRunsFailWithOneSentence) {
  const uint8_t enter = static_cast<uint8_t>(Kind::kRegionEnter);
  const uint8_t data = static_cast<uint8_t>(Kind::kTraceData);    // one arg and a payload
  const uint8_t defstr = static_cast<uint8_t>(Kind::kDefString);  // has a payload
  struct Case {
    std::vector<uint8_t> run;  // after one good event
    const char* error;
  };
  const Case cases[] = {
      {{0, 0x80, 0x80, 0x00, enter, 1, enter, 2, 5}, "repeat run of 0 events"},
      {{0, 0x85, 0x80, 0x00, enter, 1, enter, 2, 5}, "repeat run of 5 events in 1 bytes"},
      {{0, 0x81, 0x80, 0x00, data, 1, enter, 2, 5}, "not a kind of args without a payload"},
      {{0, 0x81, 0x80, 0x00, enter, 1, defstr, 2, 5}, "not a kind of args without a payload"},
      {{0, 0x81, 0x80, 0x00, enter, 1, 0x7e, 2, 5}, "not a kind of args without a payload"},
      {{0, 0x81, 0x80}, "repeat run header truncated"},
  };
  KindSchema schema;
  for (const Case& c : cases) {
    for (size_t pad : {size_t{0}, size_t{200}}) {  // the checked path, then the fast one
      std::vector<uint8_t> raw = {enter, 2, 9};
      raw.insert(raw.end(), c.run.begin(), c.run.end());
      std::vector<uint8_t> padded = raw;
      if (pad > 0 && c.run.size() > 3 && std::string(c.error).find("bytes") == std::string::npos)
        padded.insert(padded.end(), pad, 0x0a);
      std::vector<Event> out;
      std::string error;
      EXPECT_FALSE(
          DecodeEvents(padded.data(), padded.size(), 1, Source::kRuntime, schema, &out, &error));
      EXPECT_NE(error.find(c.error), std::string::npos) << error;
      ASSERT_EQ(out.size(), 1u) << error;
      EXPECT_EQ(out[0].args[0], 9u);
    }
  }
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

// Format 3.0: time args are written relative to their event's time, and read back exactly
// (before, at and after the event's time, and 0 for "none"); a chunk without the flag is read as
// absolute, as every 2.x chunk was.
TEST(EventDecoder, RelativeTimeArgsRoundTripExactly) {
  const KindSchema schema;
  StreamEncoder enc(1, Source::kRuntime);
  const uint64_t ts = 5'000'000'000;
  const uint64_t posted[] = {ts - 1500, ts, ts + 7, 0, ~uint64_t{0} >> 1};
  for (uint64_t p : posted) {
    Event e;
    e.kind = static_cast<uint16_t>(Kind::kMpiRecv);
    e.ts = ts;
    e.nargs = 6;
    uint64_t args[6] = {3, 7, 1, 128, 42, p};
    for (int i = 0; i < 6; ++i)
      e.args[i] = args[i];
    enc.Append(e);
  }
  EventDecoder d(enc.bytes().data(), enc.bytes().size(), 1, Source::kRuntime, &schema,
                 kEncoderCoding);
  Event out;
  for (uint64_t p : posted) {
    ASSERT_TRUE(d.Next(&out)) << d.error();
    EXPECT_EQ(out.ts, ts);
    EXPECT_EQ(out.args[4], 42u);  // not a time: as written
    EXPECT_EQ(out.args[5], p);
  }
  EXPECT_FALSE(d.Next(&out));
  EXPECT_TRUE(d.error().empty());
  // A posted time 1.5 us before its event takes 2 bytes (absolute, 5): kind 1, time 5, the five
  // other args 1 each, posted 2.
  StreamEncoder one(1, Source::kRuntime);
  Event e;
  e.kind = static_cast<uint16_t>(Kind::kMpiRecv);
  e.ts = ts;
  e.nargs = 6;
  e.args[5] = ts - 1500;
  one.Append(e);
  EXPECT_EQ(one.raw_size(), 1u + 5u + 5u + 2u);
  // Read as a 2.x chunk (no flag), the same bytes give the relative value, not the time.
  EventDecoder absolute(one.bytes().data(), one.bytes().size(), 1, Source::kRuntime, &schema);
  ASSERT_TRUE(absolute.Next(&out));
  EXPECT_EQ(out.args[5], 3000u);  // zigzag(1500)
}

// Format 4.0: the args kKindDeltas names are written as differences from the kind's previous
// event in the chunk, and read back exactly: counting up, going down, wrapping past 2^64, kinds
// interleaved (each against its own previous event), and from 0 again after Reset (a new chunk).
TEST(EventDecoder, DeltaArgsRoundTripExactly) {
  const KindSchema schema;
  ASSERT_EQ(schema.delta_mask(static_cast<uint16_t>(Kind::kMpiSend)), 0x1fu);
  ASSERT_EQ(schema.delta_mask(static_cast<uint16_t>(Kind::kMpiEnter)), 0u);  // goes into runs
  StreamEncoder enc(1, Source::kRuntime);
  std::vector<Event> in;
  const uint64_t requests[] = {47, 48, 51, 52, 7, ~uint64_t{0}, 0, 1ull << 63, 5};
  uint64_t ts = 1'000'000;
  for (size_t i = 0; i < std::size(requests); ++i) {
    Event s;
    s.kind = static_cast<uint16_t>(Kind::kMpiSend);
    s.ts = ts += 100;
    s.nargs = 5;
    const uint64_t args[5] = {i % 2 ? 3u : 1u, i % 2, 1, 128, requests[i]};
    std::copy(args, args + 5, s.args);
    Event done;
    done.kind = static_cast<uint16_t>(Kind::kMpiRequestDone);
    done.ts = ts += 30;
    done.nargs = 2;
    done.args[0] = requests[std::size(requests) - 1 - i];
    done.args[1] = ts - 200;  // a time: relative, not a difference
    Event enter;
    enter.kind = static_cast<uint16_t>(Kind::kMpiEnter);
    enter.ts = ts;
    enter.nargs = 2;
    enter.args[0] = 9;
    enter.args[1] = i;
    for (const Event* e : {&s, &done, &enter}) {
      enc.Append(*e);
      in.push_back(*e);
    }
  }
  auto check = [&](const StreamEncoder& from, const std::vector<Event>& want) {
    std::vector<Event> out;
    std::string error;
    ASSERT_TRUE(DecodeEvents(from.bytes().data(), from.bytes().size(), 1, Source::kRuntime, schema,
                             &out, &error, kEncoderCoding))
        << error;
    ASSERT_EQ(out.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE(DescribeEvent(want[i]));
      EXPECT_EQ(out[i].kind, want[i].kind);
      EXPECT_EQ(out[i].ts, want[i].ts);
      for (int a = 0; a < want[i].nargs; ++a)
        EXPECT_EQ(out[i].args[a], want[i].args[a]) << "arg " << a;
    }
  };
  check(enc, in);
  // The same sends counted on after a Reset: the new chunk's first send is against zeros.
  enc.Reset();
  std::vector<Event> second(in.begin() + 3, in.end());
  for (const Event& e : second)
    enc.Append(e);
  check(enc, second);
  // A send that repeats the previous one but its request (+1): one byte for each of its args.
  StreamEncoder two(1, Source::kRuntime);
  two.Append(in[0]);
  const size_t first = two.raw_size();
  Event next = in[0];
  next.ts += 100;
  next.args[4] += 1;
  two.Append(next);
  EXPECT_EQ(two.raw_size() - first, 1u + 2u + 5u);  // kind, time (100: 2 bytes), five args
  // Read without the flag (a 3.x chunk), the second send's args are the differences.
  std::vector<Event> raw;
  std::string error;
  ASSERT_TRUE(DecodeEvents(two.bytes().data(), two.bytes().size(), 1, Source::kRuntime, schema,
                           &raw, &error, kChunkRelativeTimes));
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[1].args[0], 0u);
  EXPECT_EQ(raw[1].args[4], 2u);  // zigzag(+1)
}

// The SCHEMA chunk carries the delta masks (bits 8-15 of its third field); a crafted schema with
// more kinds of differences than a decoder keeps, or with an arg both a time and a difference, is
// malformed, not a crash.
TEST(KindSchema, DeltaMasksRoundTripAndCraftedOnesAreRefused) {
  ByteBuffer buf;
  EncodeSchema(&buf);
  KindSchema read;
  ASSERT_TRUE(DecodeSchema(buf.data(), buf.size(), &read));
  EXPECT_TRUE(read == KindSchema());
  for (const KindDeltas& d : kKindDeltas) {
    EXPECT_EQ(read.delta_mask(d.id), d.mask) << d.id;
    EXPECT_LT(read.delta_slot(d.id), kMaxDeltaKinds);
    EXPECT_TRUE(read.brief(d.id) & KindSchema::kBriefDeltas);
  }
  auto entry = [](ByteBuffer* out, uint64_t id, uint64_t nargs, uint64_t flags, uint64_t times) {
    uint8_t* p = out->Reserve(6 * kMaxVarintBytes);
    for (uint64_t v : {id, nargs, flags, times, uint64_t{0}, uint64_t{0}})
      p = PutVarint(p, v);  // two empty strings: name and arg names
    out->Commit(p);
  };
  ByteBuffer many;
  for (uint64_t id = 1000; id < 1000 + kMaxDeltaKinds; ++id)
    entry(&many, id, 3, 0x3 << 8, 0);
  KindSchema fresh;  // the compiled-in table already holds std::size(kKindDeltas) of them
  EXPECT_FALSE(DecodeSchema(many.data(), many.size(), &fresh));
  ByteBuffer both;
  entry(&both, 1000, 3, 0x4 << 8, 0x4);
  KindSchema other;
  EXPECT_FALSE(DecodeSchema(both.data(), both.size(), &other));
  // Re-describing a kind keeps its slot: a file's own table over the compiled-in one.
  ByteBuffer again;
  entry(&again, 67, 5, 0x1f << 8, 0);
  KindSchema over;
  const uint8_t slot = over.delta_slot(67);
  ASSERT_TRUE(DecodeSchema(again.data(), again.size(), &over));
  EXPECT_EQ(over.delta_slot(67), slot);
}

}  // namespace
}  // namespace parmon::format
