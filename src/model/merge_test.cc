// Merge order (time, then stream, then position), filters, windows, resumption and clock
// alignment, on traces written with format::TraceWriter whose right answer the test knows.
#include "model/merge.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <tuple>

#include "format/writer.h"

namespace parmon::model {
namespace {

using format::Event;
using format::Kind;
using format::Source;

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/parmon_merge_test_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

struct StreamSpec {
  uint32_t location;
  Source source;
  std::vector<uint64_t> ts;
};

// An event's identity: (location, its arg); args are unique per test trace.
using Id = std::pair<uint32_t, uint64_t>;

// Writes the streams (each event a RegionEnter whose arg is unique) in chunks of `chunk`,
// interleaving chunks as a recorder does. Event k of the whole trace gets arg k.
void WriteTrace(const std::string& path,
                const std::vector<StreamSpec>& streams,
                size_t chunk,
                const format::KeyValues& session = {{"start_ts", "1"}},
                const std::vector<Event>& extra_runtime = {}) {
  auto w = format::TraceWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE((*w)->WriteSession(session).ok());
  format::StreamEncoder defs(0, Source::kDefinitions);
  for (const auto& s : streams) {
    Event d;
    d.kind = static_cast<uint16_t>(Kind::kDefLocation);
    d.nargs = 4;
    d.args[0] = s.location;
    d.args[1] = 1;
    d.args[2] = 500;
    d.args[3] = 1000 + s.location;
    defs.Append(d);
  }
  ASSERT_TRUE((*w)->Flush(&defs).ok());
  uint64_t arg = 0;
  std::vector<size_t> pos(streams.size(), 0);
  std::vector<uint64_t> base(streams.size());
  for (size_t i = 0; i < streams.size(); ++i) {
    base[i] = arg;
    arg += streams[i].ts.size();
  }
  for (bool more = true; more;) {
    more = false;
    for (size_t i = 0; i < streams.size(); ++i) {
      format::StreamEncoder enc(streams[i].location, streams[i].source);
      if (i == 0)
        for (const Event& e : extra_runtime)
          enc.Append(e);
      for (size_t n = 0; n < chunk && pos[i] < streams[i].ts.size(); ++n, ++pos[i])
        enc.AppendOneArg(static_cast<uint16_t>(Kind::kRegionEnter), streams[i].ts[pos[i]],
                         base[i] + pos[i]);
      if (enc.count()) {
        ASSERT_TRUE((*w)->Flush(&enc).ok());
      }
      more |= pos[i] < streams[i].ts.size();
    }
  }
  ASSERT_TRUE((*w)->Finish().ok());
}

// The expected order: every event of the reader's streams, stably sorted by (time, stream).
std::vector<Id> Reference(const Session& s, const MergeFilter& f) {
  std::vector<std::tuple<uint64_t, size_t, size_t, Id>> all;
  for (size_t i = 0; i < s.streams().size(); ++i) {
    const auto& st = s.streams()[i];
    if (st.source == Source::kDefinitions || (f.locations && !f.locations->count(st.location)) ||
        (f.sources && !f.sources->count(st.source)))
      continue;
    size_t pos = 0;
    for (const auto& ref : st.chunks) {
      format::DecodedChunk c;
      EXPECT_TRUE(s.reader().ReadChunk(ref, &c).ok());
      for (const auto& e : c.events) {
        uint64_t t = s.Aligned(static_cast<StreamIndex>(i), e.ts);
        if (t >= f.from_ts && t <= f.to_ts && e.kind_enum() == Kind::kRegionEnter)
          all.emplace_back(t, i, pos, Id{e.location, e.args[0]});
        ++pos;
      }
    }
  }
  std::sort(all.begin(), all.end());
  std::vector<Id> out;
  for (const auto& x : all)
    out.push_back(std::get<3>(x));
  return out;
}

std::vector<Id> ByRun(const Session& s, const MergeFilter& f, std::vector<uint64_t> bounds = {}) {
  Merge m(s, f);
  std::vector<Id> out;
  uint64_t last = 0;
  auto fn = [&](const Event& e, StreamIndex stream) {
    EXPECT_GE(e.ts, last) << "out of order";
    EXPECT_EQ(s.streams()[stream].location, e.location);
    last = e.ts;
    if (e.kind_enum() == Kind::kRegionEnter)
      out.push_back({e.location, e.args[0]});
  };
  for (uint64_t b : bounds) {
    m.Run(fn, b);
    EXPECT_LE(last, b);
  }
  m.Run(fn);
  EXPECT_TRUE(m.done());
  return out;
}

std::vector<Id> ByNext(const Session& s, const MergeFilter& f, std::vector<uint64_t> bounds = {}) {
  Merge m(s, f);
  std::vector<Id> out;
  Event e;
  bounds.push_back(UINT64_MAX);
  for (uint64_t b : bounds)
    while (m.Next(&e, b))
      if (e.kind_enum() == Kind::kRegionEnter)
        out.push_back({e.location, e.args[0]});
  return out;
}

std::unique_ptr<Session> OpenSession(const std::string& path) {
  auto s = Session::Open(path);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : nullptr;
}

// Three small streams with ties within and across them (args 0-3, 4-6, 7-8).
const std::vector<StreamSpec> kSmall = {{1, Source::kRuntime, {10, 20, 20, 30}},
                                        {2, Source::kRuntime, {20, 20, 25}},
                                        {3, Source::kSampler, {5, 20}}};

TEST(MergeTest, TiesGoToTheEarlierStreamThenTheEarlierEvent) {
  TempDir dir;
  std::string path = dir.path + "/t.ptrace";
  WriteTrace(path, kSmall, 2);
  auto s = OpenSession(path);
  ASSERT_TRUE(s);
  // Stream order is the order of the streams' first chunks in the file: 1, 2, 3.
  std::vector<Id> want = {{3, 7}, {1, 0}, {1, 1}, {1, 2}, {2, 4}, {2, 5}, {3, 8}, {2, 6}, {1, 3}};
  EXPECT_EQ(Reference(*s, {}), want);
  EXPECT_EQ(ByRun(*s, {}), want);
  EXPECT_EQ(ByNext(*s, {}), want);
}

TEST(MergeTest, FiltersAndWindows) {
  TempDir dir;
  std::string path = dir.path + "/t.ptrace";
  WriteTrace(path, kSmall, 1);  // one event per chunk
  auto s = OpenSession(path);
  ASSERT_TRUE(s);
  MergeFilter by_location;
  by_location.locations = std::set<uint32_t>{2, 3};
  EXPECT_EQ(ByRun(*s, by_location), (std::vector<Id>{{3, 7}, {2, 4}, {2, 5}, {3, 8}, {2, 6}}));
  EXPECT_EQ(ByNext(*s, by_location), ByRun(*s, by_location));
  MergeFilter by_source;
  by_source.sources = std::set<Source>{Source::kSampler};
  EXPECT_EQ(ByRun(*s, by_source), (std::vector<Id>{{3, 7}, {3, 8}}));
  MergeFilter window;  // inclusive at both ends
  window.from_ts = 20;
  window.to_ts = 25;
  std::vector<Id> want = {{1, 1}, {1, 2}, {2, 4}, {2, 5}, {3, 8}, {2, 6}};
  EXPECT_EQ(Reference(*s, window), want);
  EXPECT_EQ(ByRun(*s, window), want);
  EXPECT_EQ(ByNext(*s, window), want);
}

TEST(MergeTest, ManyChunksAndStreamsMatchTheReferenceAlsoWhenResumed) {
  TempDir dir;
  std::string path = dir.path + "/t.ptrace";
  std::mt19937_64 rng(42);
  std::vector<StreamSpec> streams;
  for (uint32_t l = 1; l <= 7; ++l) {
    StreamSpec sp{l, l % 3 ? Source::kRuntime : Source::kSched, {}};
    uint64_t t = 100;
    for (int i = 0; i < 3000; ++i)
      sp.ts.push_back(t += rng() % 4);  // many ties, within and across streams
    streams.push_back(sp);
  }
  WriteTrace(path, streams, 97);
  auto s = OpenSession(path);
  ASSERT_TRUE(s);
  std::vector<Id> want = Reference(*s, {});
  ASSERT_EQ(want.size(), 7u * 3000);
  EXPECT_EQ(ByRun(*s, {}), want);
  EXPECT_EQ(ByNext(*s, {}), want);
  // Stopped at bounds and resumed: the same sequence.
  std::vector<uint64_t> bounds = {50, 150, 151, 1000, 1000, 2500};
  EXPECT_EQ(ByRun(*s, {}, bounds), want);
  EXPECT_EQ(ByNext(*s, {}, bounds), want);
  MergeFilter f;
  f.from_ts = 900;
  f.to_ts = 2000;
  f.sources = std::set<Source>{Source::kSched};
  EXPECT_EQ(ByRun(*s, f, bounds), Reference(*s, f));
  EXPECT_EQ(ByNext(*s, f), Reference(*s, f));
}

// 40 live streams (Run's loser tree, Merge::kTreeFrom) that interleave event by event with
// ties, some ending early and some starting late: the reference order, also resumed and windowed.
TEST(MergeTest, ManyInterleavedStreamsTakeTheTreeAndMatchTheReference) {
  TempDir dir;
  std::string path = dir.path + "/t.ptrace";
  std::mt19937_64 rng(7);
  std::vector<StreamSpec> streams;
  for (uint32_t l = 1; l <= 40; ++l) {
    StreamSpec sp{l, Source::kRuntime, {}};
    uint64_t t = l % 5 == 0 ? 2000 : 100;  // some start late
    int n = l % 7 == 0 ? 50 : 600;         // some end early
    for (int i = 0; i < n; ++i)
      sp.ts.push_back(t += rng() % 3);
    streams.push_back(sp);
  }
  WriteTrace(path, streams, 31);
  auto s = OpenSession(path);
  ASSERT_TRUE(s);
  std::vector<Id> want = Reference(*s, {});
  EXPECT_EQ(ByRun(*s, {}), want);
  EXPECT_EQ(ByNext(*s, {}), want);
  std::vector<uint64_t> bounds = {99, 150, 150, 700, 2100};
  EXPECT_EQ(ByRun(*s, {}, bounds), want);
  EXPECT_EQ(ByNext(*s, {}, bounds), want);  // Next's heap, stopped and resumed
  MergeFilter f;
  f.from_ts = 300;
  f.to_ts = 2200;
  EXPECT_EQ(ByRun(*s, f, bounds), Reference(*s, f));
  EXPECT_EQ(ByNext(*s, f, bounds), Reference(*s, f));
  // Run and Next taking turns on one merge (the tree, the heap and the scan as streams end).
  Merge m(*s, {});
  std::vector<Id> mixed;
  Event e;
  auto take = [&](const Event& x, StreamIndex) {
    if (x.kind_enum() == Kind::kRegionEnter)
      mixed.push_back({x.location, x.args[0]});
  };
  for (uint64_t b : {150, 400, 900, 1500, 2100, 2400, 2600}) {
    for (int k = 0; k < 500 && m.Next(&e, b); ++k)
      take(e, 0);
    m.Run(take, b);
  }
  while (m.Next(&e))
    take(e, 0);
  EXPECT_EQ(mixed, want);
}

Event MakeEvent(Kind kind, uint64_t ts, std::vector<uint64_t> args) {
  Event e;
  e.kind = static_cast<uint16_t>(kind);
  e.ts = ts;
  e.nargs = static_cast<uint8_t>(args.size());
  std::copy(args.begin(), args.end(), e.args);
  return e;
}

// A per-rank session: rank 1's clock reads 1 ms more than rank 0's. Its ping-pong (latency 10 ns
// each way) measures that, and the merge puts rank 1's events on rank 0's clock.
TEST(MergeTest, AlignsThePerRankFilesOfASession) {
  TempDir dir;
  const uint64_t kSkew = 1000000;
  const uint64_t t0 = 5000000;  // rank 0's ping
  std::vector<Event> rank0 = {MakeEvent(Kind::kMpiInit, 4000000, {0, 2, 0}),
                              MakeEvent(Kind::kMpiClockSync, t0 + 30, {1, 0, t0, t0 + 30})};
  std::vector<Event> rank1 = {
      MakeEvent(Kind::kMpiInit, 4000000 + kSkew, {1, 2, 0}),
      MakeEvent(Kind::kMpiClockSync, t0 + kSkew + 20, {0, 0, t0 + kSkew + 20, t0 + kSkew + 10})};
  WriteTrace(dir.path + "/rank-0.ptrace", {{1, Source::kRuntime, {6000000, 7000000}}}, 10,
             {{"start_ts", "3000000"}, {"mpi_rank", "0"}}, rank0);
  WriteTrace(dir.path + "/rank-1.ptrace",
             {{1, Source::kRuntime, {6000000 + kSkew + 1, 7000000 + kSkew - 1}}}, 10,
             {{"start_ts", "3500000"}, {"mpi_rank", "1"}}, rank1);
  auto s = OpenSession(dir.path);
  ASSERT_TRUE(s);
  ASSERT_FALSE(s->clocks().empty());
  ASSERT_EQ(s->clocks().offsets.size(), 1u);
  EXPECT_EQ(s->clocks().offsets[0].offset_ns, static_cast<int64_t>(kSkew));
  ASSERT_EQ(s->streams().size(), 2u);
  EXPECT_EQ(s->first_ts(1), 4000000u);  // rank 1's MpiInit on rank 0's clock
  EXPECT_EQ(s->start(), 4000000u);
  EXPECT_EQ(s->end(), 7000000u);
  // Locations by numeric id: rank 0's first.
  uint32_t l0 = s->streams()[0].location, l1 = s->streams()[1].location;
  EXPECT_EQ(s->RankOf(l0), 0);
  EXPECT_EQ(s->RankOf(l1), 1);
  EXPECT_EQ(s->FileOf(l1), 1u);
  EXPECT_EQ(s->TidOf(l0), 1001u);
  // Aligned: rank 1's events interleave with rank 0's.
  Merge m(*s);
  std::vector<std::pair<uint64_t, uint32_t>> got;
  m.Run([&](const Event& e, StreamIndex) {
    if (e.kind_enum() == Kind::kRegionEnter)
      got.emplace_back(e.ts, e.location);
    if (e.kind_enum() == Kind::kMpiClockSync && e.location == l1) {
      EXPECT_EQ(e.args[2], t0 + 20);  // time args are aligned too
    }
  });
  std::vector<std::pair<uint64_t, uint32_t>> want = {
      {6000000, l0}, {6000001, l1}, {6999999, l1}, {7000000, l0}};
  EXPECT_EQ(got, want);
  // Without alignment, every file keeps its own clock.
  SessionOptions raw;
  raw.align_clocks = false;
  auto unaligned = Session::Open(dir.path, raw);
  ASSERT_TRUE(unaligned.ok());
  EXPECT_TRUE((*unaligned)->clocks().empty());
  EXPECT_EQ((*unaligned)->first_ts(1), 4000000u + kSkew);
  EXPECT_EQ((*unaligned)->RankOf(l1), 1);
}

TEST(MergeTest, BadSessionValueIsOneSentence) {
  TempDir dir;
  std::string path = dir.path + "/t.ptrace";
  WriteTrace(path, {{1, Source::kRuntime, {10, 20}}}, 1, {{"cpus", "many"}});
  auto s = Session::Open(path);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ((*s)->warnings(),
            std::vector<std::string>{
                "bad session metadata: 'cpus' is not a number ('many'); it is read as absent"});
  EXPECT_EQ((*s)->info().cpus, 0u);
  EXPECT_EQ((*s)->reader().session().count("cpus"), 0u);  // no consumer sees the bad value
  EXPECT_TRUE((*s)->problems().empty());
  size_t events = 0;
  Merge(**s).Run([&](const format::Event&, StreamIndex) { ++events; });
  EXPECT_EQ(events, 2u);
}

}  // namespace
}  // namespace parmon::model
