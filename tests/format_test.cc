// The trace format: encode/decode round trip of every kind, framing, and what a reader makes of
// damaged files (truncated, bit-flipped, not a trace, another version).
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "base/crc32c.h"
#include "base/varint.h"
#include "format/reader.h"
#include "format/writer.h"
#include "model/merge.h"
#include "model/session.h"
#include "support/e2e.h"

namespace parmon::format {
namespace {

using parmon::testing::TempDir;

// One event of `kind` with args and payload derived from `seed`, valid for the kind's schema.
Event MakeEvent(const KindInfo& info, uint64_t ts, uint64_t seed, std::string* payload_store) {
  Event e;
  e.kind = info.id;
  e.ts = ts;
  e.nargs = info.nargs;
  for (int i = 0; i < e.nargs; ++i)
    e.args[i] = seed * 1000003u + static_cast<uint64_t>(i) * 77;
  if (info.has_payload) {
    *payload_store = "payload-" + std::to_string(seed) + std::string(seed % 50, 'x');
    e.payload = *payload_store;
  }
  return e;
}

std::vector<KindInfo> AllKinds() {
  std::vector<KindInfo> kinds;
  for (uint32_t id = 0; id < 65536; ++id)
    if (GetKindInfo(static_cast<uint16_t>(id)).name != nullptr)
      kinds.push_back(GetKindInfo(static_cast<uint16_t>(id)));
  return kinds;
}

TEST(Varint, RoundTripsEdgeValues) {
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 16383ull, 16384ull, ~0ull, 1ull << 63}) {
    uint8_t buf[kMaxVarintBytes];
    uint8_t* end = PutVarint(buf, v);
    uint64_t out;
    ASSERT_EQ(GetVarint(buf, end, &out), end);
    EXPECT_EQ(out, v);
    // Truncated input is refused, not misread.
    if (end - buf > 1) {
      EXPECT_EQ(GetVarint(buf, end - 1, &out), nullptr);
    }
  }
  for (int64_t v : std::vector<int64_t>{0, -1, 1, INT64_MIN, INT64_MAX})
    EXPECT_EQ(UnZigZag(ZigZag(v)), v);
}

TEST(Crc32c, MatchesKnownValue) {
  // The standard check value of CRC-32C for "123456789".
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
}

TEST(Codec, EveryKindRoundTrips) {
  const auto kinds = AllKinds();
  ASSERT_GT(kinds.size(), 20u);
  StreamEncoder enc(7, Source::kRuntime);
  std::vector<std::string> payloads(kinds.size() * 3);
  std::vector<Event> expected;
  uint64_t ts = 1'000'000'000;
  for (size_t rep = 0; rep < 3; ++rep) {
    for (size_t k = 0; k < kinds.size(); ++k) {
      ts += 1 + (k * 37) % 1000;
      Event e = MakeEvent(kinds[k], ts, rep * 1000 + k, &payloads[rep * kinds.size() + k]);
      enc.Append(e);
      expected.push_back(e);
    }
  }
  // A timestamp that goes backwards still round-trips (zigzag deltas).
  Event back = expected.front();
  back.ts = ts - 500;
  enc.Append(back);
  expected.push_back(back);

  std::vector<Event> decoded;
  std::string error;
  KindSchema schema;
  // An encoder's bytes are what a 4.0 EVENTS chunk holds: time args relative, some args
  // differences (kEncoderCoding).
  ASSERT_TRUE(DecodeEvents(enc.bytes().data(), enc.bytes().size(), 7, Source::kRuntime, schema,
                           &decoded, &error, kEncoderCoding))
      << error;
  ASSERT_EQ(decoded.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(DescribeEvent(expected[i]));
    EXPECT_EQ(decoded[i].kind, expected[i].kind);
    EXPECT_EQ(decoded[i].ts, expected[i].ts);
    EXPECT_EQ(decoded[i].nargs, expected[i].nargs);
    for (int a = 0; a < expected[i].nargs; ++a)
      EXPECT_EQ(decoded[i].args[a], expected[i].args[a]);
    EXPECT_EQ(decoded[i].payload, expected[i].payload);
    EXPECT_EQ(decoded[i].location, 7u);
  }
}

TEST(Codec, SchemaRoundTripsAndTeachesUnknownKinds) {
  ByteBuffer buf;
  EncodeSchema(&buf);
  KindSchema schema;
  ASSERT_TRUE(DecodeSchema(buf.data(), buf.size(), &schema));
  for (const auto& k : AllKinds()) {
    EXPECT_TRUE(schema.Known(k.id));
    EXPECT_EQ(schema.nargs(k.id), k.nargs);
    EXPECT_EQ(schema.name(k.id), k.name);
  }
  // A kind from a newer writer: known only through the file's schema, then decodable.
  schema.Set(60000, 2, true, 0, "FutureKind", "a,b");
  StreamEncoder enc(1, Source::kRuntime);
  uint8_t* p = nullptr;
  ByteBuffer raw;
  p = raw.Reserve(64);
  p = PutVarint(p, 60000);
  p = PutVarint(p, ZigZag(5));
  p = PutVarint(p, 11);
  p = PutVarint(p, 22);
  p = PutVarint(p, 3);
  std::memcpy(p, "abc", 3);
  raw.Commit(p + 3);
  std::vector<Event> out;
  std::string error;
  ASSERT_TRUE(DecodeEvents(raw.data(), raw.size(), 1, Source::kRuntime, schema, &out, &error));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].args[1], 22u);
  EXPECT_EQ(out[0].payload, "abc");
  KindSchema plain;
  out.clear();
  EXPECT_FALSE(DecodeEvents(raw.data(), raw.size(), 1, Source::kRuntime, plain, &out, &error));
  EXPECT_NE(error.find("unknown event kind 60000"), std::string::npos) << error;
}

// Writes a trace with `streams` threads of `per_stream` region events in chunks of `chunk`.
void WriteTrace(const std::string& path,
                int streams,
                int per_stream,
                int chunk,
                bool finish = true) {
  auto w = TraceWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE((*w)->WriteSession({{"command", "test"}, {"start_ts", "1000"}}).ok());
  StreamEncoder defs(0, Source::kDefinitions);
  for (int s = 1; s <= streams; ++s) {
    Event d;
    d.kind = static_cast<uint16_t>(Kind::kDefLocation);
    d.nargs = 4;
    d.args[0] = static_cast<uint64_t>(s);
    d.args[1] = 1;
    d.args[2] = 100;
    d.args[3] = 100u + static_cast<uint64_t>(s);
    d.payload = "thread";
    defs.Append(d);
  }
  ASSERT_TRUE((*w)->Flush(&defs).ok());
  std::vector<std::unique_ptr<StreamEncoder>> enc;
  for (int s = 1; s <= streams; ++s)
    enc.push_back(std::make_unique<StreamEncoder>(static_cast<uint32_t>(s), Source::kRuntime));
  for (int i = 0; i < per_stream; ++i) {
    for (int s = 0; s < streams; ++s) {
      enc[s]->AppendOneArg(static_cast<uint16_t>(i % 2 ? Kind::kRegionLeave : Kind::kRegionEnter),
                           2000 + static_cast<uint64_t>(i) * 10 + static_cast<uint64_t>(s), 1);
      if (enc[s]->count() == static_cast<uint32_t>(chunk)) {
        ASSERT_TRUE((*w)->Flush(enc[s].get()).ok());
      }
    }
  }
  for (auto& e : enc)
    ASSERT_TRUE((*w)->Flush(e.get()).ok());
  if (finish) {
    ASSERT_TRUE((*w)->Finish().ok());
  }
}

uint64_t CountEvents(const TraceReader& r) {
  auto session = model::Session::Over(r);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok())
    return 0;
  model::Merge c(**session);
  Event e;
  uint64_t n = 0, last = 0;
  while (c.Next(&e)) {
    EXPECT_GE(e.ts, last) << "merge out of order";
    last = e.ts;
    ++n;
  }
  return n;
}

// Names: a location defined again under a new name goes by the last and keeps the first; a
// main thread defined without a name takes its process's command, in whichever order they come.
TEST(Definitions, RenamesKeepTheFirstNameAndMainThreadsAreNeverNameless) {
  auto def = [](Kind kind, std::initializer_list<uint64_t> args, std::string_view payload) {
    Event e;
    e.kind = static_cast<uint16_t>(kind);
    e.nargs = static_cast<uint8_t>(args.size());
    int i = 0;
    for (uint64_t a : args)
      e.args[i++] = a;
    e.payload = payload;
    return e;
  };
  const uint64_t kThread = static_cast<uint64_t>(LocationType::kThread);
  Definitions d;
  d.Apply(def(Kind::kDefLocation, {1, kThread, 10, 10}, "forkexec"));
  d.Apply(def(Kind::kDefLocation, {1, kThread, 10, 10}, "true"));
  d.Apply(def(Kind::kDefLocation, {1, kThread, 10, 10}, ""));  // no name: keeps "true"
  EXPECT_EQ(d.locations[1].name, "true");
  EXPECT_EQ(d.locations[1].first_name, "forkexec");
  d.Apply(def(Kind::kDefLocation, {2, kThread, 20, 20}, ""));
  EXPECT_EQ(d.locations[2].name, "");
  d.Apply(def(Kind::kDefProcess, {20, 1}, "/usr/bin/python3 -c pass"));
  EXPECT_EQ(d.locations[2].name, "python3");
  EXPECT_EQ(d.locations[2].first_name, "") << "a name from the command is no rename";
  d.Apply(def(Kind::kDefLocation, {2, kThread, 20, 20}, "python3-worker"));
  EXPECT_EQ(d.locations[2].name, "python3-worker");
  EXPECT_EQ(d.locations[2].first_name, "");
  d.Apply(def(Kind::kDefProcess, {30, 1}, "/bin/sleep 1"));  // process first, thread later
  d.Apply(def(Kind::kDefLocation, {3, kThread, 30, 30}, ""));
  EXPECT_EQ(d.locations[3].name, "sleep");
  d.Apply(def(Kind::kDefLocation, {4, kThread, 30, 31}, ""));  // not the main thread
  EXPECT_EQ(d.locations[4].name, "");
  EXPECT_EQ(CommandName("a/b/c"), "c");
  EXPECT_EQ(CommandName(""), "");
}

TEST(Reader, ReadsWhatWasWrittenInTimeOrder) {
  TempDir dir;
  std::string path = dir.File("t.ptrace");
  WriteTrace(path, 3, 10000, 1000);
  auto r = TraceReader::Open(path, {true});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE((*r)->closed_cleanly());
  EXPECT_TRUE((*r)->problems().empty());
  EXPECT_EQ((*r)->total_events(), 30000u);
  EXPECT_EQ((*r)->definitions().locations.size(), 3u);
  EXPECT_EQ((*r)->SessionValue("command"), "test");
  EXPECT_EQ(CountEvents(**r), 30000u);
  // Time-range and location filters.
  model::MergeFilter f;
  f.locations = std::set<uint32_t>{2};
  f.from_ts = 2000 + 100 * 10;
  f.to_ts = 2000 + 199 * 10 + 5;
  auto session = model::Session::Over(**r);
  ASSERT_TRUE(session.ok()) << session.status().message();
  model::Merge c(**session, f);
  Event e;
  uint64_t n = 0;
  while (c.Next(&e)) {
    EXPECT_EQ(e.location, 2u);
    ++n;
  }
  EXPECT_EQ(n, 100u);
}

std::vector<char> Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
void Spit(const std::string& path, const std::vector<char>& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
}

TEST(Reader, TruncatedFileKeepsEveryWholeChunk) {
  TempDir dir;
  std::string path = dir.File("t.ptrace");
  WriteTrace(path, 2, 10000, 1000);
  std::vector<char> data = Slurp(path);
  auto full = TraceReader::Open(path);
  ASSERT_TRUE(full.ok());
  // Cut in the middle of the last events chunk of stream 2.
  const auto& chunks = (*full)->streams()[1].chunks;
  uint64_t cut = chunks.back().offset + sizeof(ChunkHeader) + 10;
  data.resize(cut);
  Spit(path, data);
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE((*r)->closed_cleanly());
  EXPECT_EQ((*r)->total_events(), 20000u - 1000u);
  EXPECT_EQ(CountEvents(**r), 19000u);
  bool named = false;
  for (const auto& p : (*r)->problems()) {
    if (p.message.find("ends inside chunk") != std::string::npos) {
      named = true;
      EXPECT_EQ(p.events_lost, 1000);
      EXPECT_EQ(p.location, std::optional<uint32_t>(2));
    }
  }
  EXPECT_TRUE(named);
}

TEST(Reader, BitFlipInPayloadSkipsOnlyThatChunkWithExactCount) {
  TempDir dir;
  std::string path = dir.File("t.ptrace");
  WriteTrace(path, 2, 10000, 1000);
  auto full = TraceReader::Open(path);
  ASSERT_TRUE(full.ok());
  const ChunkRef victim = (*full)->streams()[0].chunks[3];
  std::vector<char> data = Slurp(path);
  data[victim.offset + sizeof(ChunkHeader) + victim.header.stored_size / 2] ^= 0x10;
  Spit(path, data);
  auto r = TraceReader::Open(path, {true});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ((*r)->problems().size(), 1u);
  const Problem& p = (*r)->problems()[0];
  EXPECT_NE(p.message.find(fmt::format("offset {}", victim.offset)), std::string::npos)
      << p.message;
  EXPECT_NE(p.message.find("checksum"), std::string::npos) << p.message;
  EXPECT_EQ(p.events_lost, 1000);
  EXPECT_EQ(CountEvents(**r), 19000u);
}

TEST(Reader, BitFlipInHeaderResynchronisesAndEndTotalsCountTheLoss) {
  TempDir dir;
  std::string path = dir.File("t.ptrace");
  WriteTrace(path, 2, 10000, 1000);
  auto full = TraceReader::Open(path);
  ASSERT_TRUE(full.ok());
  const ChunkRef victim = (*full)->streams()[1].chunks[5];
  std::vector<char> data = Slurp(path);
  data[victim.offset + 20] ^= 0x01;  // inside first_ts: the header checksum fails
  Spit(path, data);
  auto r = TraceReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE((*r)->closed_cleanly());
  EXPECT_EQ(CountEvents(**r), 19000u);
  bool header_named = false, exact = false;
  for (const auto& p : (*r)->problems()) {
    if (p.message.find("damaged header") != std::string::npos &&
        p.message.find(fmt::format("offset {}", victim.offset)) != std::string::npos)
      header_named = true;
    if (p.location == std::optional<uint32_t>(2) && p.events_lost == 1000)
      exact = true;
  }
  EXPECT_TRUE(header_named);
  EXPECT_TRUE(exact) << "the END chunk's totals give the exact loss";
}

TEST(Reader, RandomBitFlipsNeverCrashAndKeepIntactChunks) {
  TempDir dir;
  std::string path = dir.File("t.ptrace");
  WriteTrace(path, 3, 3000, 500);
  const std::vector<char> pristine = Slurp(path);
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<char> data = pristine;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      data[16 + rng() % (data.size() - 16)] ^= static_cast<char>(1u << (rng() % 8));
    Spit(path, data);
    auto r = TraceReader::Open(path, {true});
    ASSERT_TRUE(r.ok()) << r.status().message();
    uint64_t n = CountEvents(**r);
    uint64_t lost_known = 0;
    for (const auto& p : (*r)->problems())
      if (p.events_lost > 0)
        lost_known += static_cast<uint64_t>(p.events_lost);
    EXPECT_LE(n, 9000u);
    EXPECT_GE(n, 9000u - 500u * static_cast<uint64_t>(flips) - 0u) << "trial " << trial;
    if (n < 9000u) {
      EXPECT_FALSE((*r)->problems().empty()) << "silent loss in trial " << trial;
    }
    (void)lost_known;
  }
}

TEST(Reader, RejectsNonTracesAndOtherVersionsInOneSentence) {
  TempDir dir;
  std::string junk = dir.File("junk");
  Spit(junk, std::vector<char>(100, 'z'));
  auto r = TraceReader::Open(junk);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is not a parmon trace"), std::string::npos);

  std::string empty = dir.File("empty");
  Spit(empty, {});
  EXPECT_FALSE(TraceReader::Open(empty).ok());
  EXPECT_FALSE(TraceReader::Open(dir.File("missing")).ok());

  std::string path = dir.File("t.ptrace");
  WriteTrace(path, 1, 10, 10);
  std::vector<char> data = Slurp(path);
  data[8] = 9;   // version_major
  data[10] = 0;  // version_minor (this writer's is 1)
  Spit(path, data);
  r = TraceReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("format version 9.0"), std::string::npos)
      << r.status().message();
}

TEST(Writer, ReportsAFullDisk) {
  // /dev/full fails every write with ENOSPC.
  auto w = TraceWriter::Create("/dev/full");
  if (w.ok()) {
    StreamEncoder enc(1, Source::kRuntime);
    for (int i = 0; i < 1000; ++i)
      enc.AppendOneArg(16, static_cast<uint64_t>(i), 1);
    Status s = (*w)->Flush(&enc);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.message();
  } else {
    EXPECT_NE(w.status().message().find("No space left on device"), std::string::npos)
        << w.status().message();
  }
}

}  // namespace
}  // namespace parmon::format
