// The event feed (feed.h): clock alignment of a multi-recorder session and the k-way merge that
// hands the analysis its events in time order.
#include "analysis/feed.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "analysis/engine_impl.h"
#include "format/codec.h"

namespace parmon::analysis {

using format::Kind;

double ClockMap::At(uint64_t t, size_t* hint) const {
  size_t n = samples.size();
  if (t <= samples.front().first)
    return samples.front().second;
  if (t >= samples.back().first)
    return samples.back().second;
  size_t i = *hint < n - 1 && samples[*hint].first <= t ? *hint : 0;
  while (samples[i + 1].first < t)
    ++i;
  *hint = i;
  const auto& [t0, o0] = samples[i];
  const auto& [t1, o1] = samples[i + 1];
  return o0 + (o1 - o0) * static_cast<double>(t - t0) / static_cast<double>(t1 - t0);
}

uint64_t ClockMap::Apply(uint64_t t, size_t* hint) const {
  double v = static_cast<double>(t) - At(t, hint);
  return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v));
}

// A session of several recorders (one file per rank, maybe on several hosts) has one clock per
// file; one file has one clock.
ClockAlignment ClockAlignment::Measure(const format::TraceReader& reader, bool align) {
  ClockAlignment result;
  size_t files = reader.parts().size();
  if (!align || files < 2)
    return result;
  struct Sync {
    uint32_t file;
    int64_t peer;
    uint64_t epoch, t_send, t_recv;
  };
  std::vector<Sync> syncs;
  std::vector<int64_t> file_rank(files, -1);
  format::DecodedChunk chunk;
  for (const auto& st : reader.streams()) {
    if (st.source != format::Source::kRuntime)
      continue;
    for (const auto& ref : st.chunks) {
      // A damaged chunk is recorded in reader.problems(); what decoded is still used.
      (void)reader.ReadChunk(ref, &chunk);
      for (const auto& e : chunk.events) {
        if (e.kind_enum() == Kind::kMpiInit) {
          auto rank = static_cast<int64_t>(e.args[0]);
          if (file_rank[ref.file] < 0 || rank < file_rank[ref.file])
            file_rank[ref.file] = rank;
        } else if (e.kind_enum() == Kind::kMpiClockSync) {
          syncs.push_back(
              {ref.file, static_cast<int64_t>(e.args[0]), e.args[1], e.args[2], e.args[3]});
        }
      }
    }
  }
  // Rank 0's side of each ping-pong, by (peer, epoch).
  std::map<std::pair<int64_t, uint64_t>, const Sync*> rank0;
  for (const auto& x : syncs)
    if (file_rank[x.file] == 0)
      rank0[{x.peer, x.epoch}] = &x;
  std::vector<ClockMap> clocks(files);
  for (const auto& x : syncs) {
    int64_t rank = file_rank[x.file];
    if (rank <= 0 || x.peer != 0)
      continue;
    auto it = rank0.find({rank, x.epoch});
    if (it == rank0.end())
      continue;
    const Sync& z = *it->second;
    auto d = [](uint64_t v) { return static_cast<double>(v); };
    double offset = (d(x.t_recv) + d(x.t_send) - d(z.t_send) - d(z.t_recv)) / 2;
    double uncertainty = ((d(z.t_recv) - d(z.t_send)) - (d(x.t_send) - d(x.t_recv))) / 2;
    // Within its own uncertainty an offset is noise: ranks sharing a clock always measure one.
    if (offset <= uncertainty && offset >= -uncertainty)
      offset = 0;
    clocks[x.file].samples.emplace_back(x.t_recv, offset);
  }
  bool any = false;
  for (uint32_t f = 0; f < files; ++f) {
    auto& v = clocks[f].samples;
    if (v.empty())
      continue;
    std::sort(v.begin(), v.end());
    result.offsets_.push_back(
        {static_cast<int32_t>(file_rank[f]), static_cast<int64_t>(std::llround(v.front().second)),
         static_cast<int64_t>(std::llround(v.back().second)), static_cast<uint32_t>(v.size())});
    bool zero = std::all_of(v.begin(), v.end(), [](const auto& p) { return p.second == 0; });
    if (zero)
      v.clear();
    any |= !zero;
  }
  std::sort(result.offsets_.begin(), result.offsets_.end(),
            [](const auto& a, const auto& b) { return a.rank < b.rank; });
  if (any)
    result.file_clocks_ = std::move(clocks);
  return result;
}

const ClockMap* ClockAlignment::ClockOf(const format::Stream& st) const {
  if (file_clocks_.empty() || st.chunks.empty())
    return nullptr;
  const ClockMap& c = file_clocks_[st.chunks.front().file];
  return c.samples.empty() ? nullptr : &c;
}

uint64_t ClockAlignment::Aligned(const format::Stream& st, uint64_t t) const {
  size_t hint = 0;
  const ClockMap* c = ClockOf(st);
  return c ? c->Apply(t, &hint) : t;
}

namespace {

// One stream in the merge: its decompressed chunk, decoding only the next event.
struct StreamHead {
  const format::Stream* stream = nullptr;
  void* loc = nullptr;  // the dispatcher's location of the stream
  size_t next_chunk = 0;
  std::vector<uint8_t> raw;
  format::EventDecoder decoder;
  format::Event event;
  const ClockMap* clock = nullptr;  // its file's clock against rank 0's, if not the same
  size_t clock_hint = 0;
};

// An event of another recorder's file, its time and the times in its args put on rank 0's
// clock.
[[gnu::noinline]] void Align(StreamHead& h, const format::KindSchema& schema) {
  format::Event& e = h.event;
  e.ts = h.clock->Apply(e.ts, &h.clock_hint);
  uint32_t mask = schema.time_mask(e.kind);
  for (int i = 0; mask && i < e.nargs; ++i, mask >>= 1)
    if ((mask & 1) && e.args[i] != 0 && e.args[i] != UINT64_MAX)
      e.args[i] = h.clock->Apply(e.args[i], &h.clock_hint);
}

uint64_t ChunkTs(StreamHead& h, uint64_t t) {
  return h.clock ? h.clock->Apply(t, &h.clock_hint) : t;
}

// Moves h to its stream's next chunk in the window: false at the end (kept out of the merge
// loop's code, which it would only make slower).
[[gnu::noinline]] bool NextChunk(StreamHead& h,
                                 const format::TraceReader& reader,
                                 uint64_t from,
                                 uint64_t to) {
  for (;;) {
    if (!h.decoder.error().empty()) {
      // Let the reader record the damaged chunk as a problem, as MergeCursor would.
      format::DecodedChunk scratch;
      (void)reader.ReadChunk(h.stream->chunks[h.next_chunk - 1], &scratch);
    }
    const format::ChunkRef* ref = nullptr;
    while (h.next_chunk < h.stream->chunks.size()) {
      const format::ChunkRef& r = h.stream->chunks[h.next_chunk++];
      if (ChunkTs(h, r.header.last_ts) < from)
        continue;
      if (ChunkTs(h, r.header.first_ts) > to)
        return false;
      ref = &r;
      break;
    }
    if (!ref)
      return false;
    // A chunk whose payload is damaged is recorded in reader.problems() and skipped.
    if (!reader.ReadRawPayload(*ref, &h.raw).ok()) {
      h.decoder = {};
      continue;
    }
    h.decoder =
        format::EventDecoder(h.raw.data(), h.raw.size(), ref->header.location,
                             static_cast<format::Source>(ref->header.source), &reader.schema());
    return true;
  }
}

// Loads the next event of a stream into h.event (skipping events before the window).
inline bool Advance(StreamHead& h, const format::TraceReader& reader, uint64_t from, uint64_t to) {
  do {
    while (h.decoder.Next(&h.event)) {
      if (h.clock) [[unlikely]]
        Align(h, reader.schema());
      if (h.event.ts >= from) [[likely]]
        return true;
    }
  } while (NextChunk(h, reader, from, to));
  return false;
}

// A head for every stream with events in the window.
std::vector<std::unique_ptr<StreamHead>> OpenHeads(const format::TraceReader& reader,
                                                   const ClockAlignment& clocks,
                                                   uint64_t from,
                                                   uint64_t to) {
  std::vector<std::unique_ptr<StreamHead>> heads;
  for (const auto& s : reader.streams()) {
    if (s.source == format::Source::kDefinitions || s.events == 0)
      continue;
    if (clocks.Aligned(s, s.last_ts) < from || clocks.Aligned(s, s.first_ts) > to)
      continue;
    heads.push_back(std::make_unique<StreamHead>());
    heads.back()->stream = &s;
    heads.back()->clock = clocks.ClockOf(s);
  }
  return heads;
}

}  // namespace

// The k-way merge, in format::MergeCursor's order (time, then stream, then position), tuned for
// throughput: each stream keeps its decompressed chunk and decodes only its next event (no chunk
// of 96-byte Events is materialised: memory per stream is one raw chunk), the heads sit in a
// flat array where a linear scan for the minimum beats a heap for the few to few hundred streams
// of a trace, and the second-smallest head bounds a run of events taken from one stream without
// looking at the others again. Inlining the decoder and the event dispatch into the merge loop
// saves about a tenth of the CPU time per event (bench/report_bench).
template <typename Dispatcher>
[[gnu::flatten]] void Feed(const format::TraceReader& reader,
                           const ClockAlignment& clocks,
                           uint64_t from,
                           uint64_t to,
                           Dispatcher& d) {
  using Location = typename Dispatcher::Location;
  std::vector<std::unique_ptr<StreamHead>> heads = OpenHeads(reader, clocks, from, to);
  // Every stream's location is resolved before the first event, so the dispatcher's table does
  // not grow (and these pointers stay valid) while events are consumed.
  for (auto& h : heads)
    d.Resolve(h->stream->location);
  for (auto& h : heads)
    h->loc = d.Resolve(h->stream->location);
  std::vector<StreamHead*> live;
  std::vector<uint64_t> live_ts;  // live[i]->event.ts, packed: the scan reads one cache line
  for (auto& h : heads)
    if (Advance(*h, reader, from, to)) {
      live.push_back(h.get());
      live_ts.push_back(h->event.ts);
    }
  while (!live.empty()) {
    // The smallest head and the bound set by the second smallest.
    size_t best = 0;
    uint64_t best_ts = live_ts[0];
    uint64_t bound = UINT64_MAX;
    size_t bound_index = SIZE_MAX;
    for (size_t i = 1; i < live_ts.size(); ++i) {
      uint64_t t = live_ts[i];
      if (t < bound) [[unlikely]] {  // (bound >= best_ts: one compare for most heads)
        if (t < best_ts) {
          bound = best_ts;
          bound_index = best;
          best_ts = t;
          best = i;
        } else {
          bound = t;
          bound_index = i;
        }
      }
    }
    StreamHead& h = *live[best];
    // Take events while they sort before the bound (ties go to the earlier stream).
    bool earlier = best < bound_index;
    bool more;
    do {
      if (h.event.ts > to) {
        more = false;
        break;
      }
      d.ConsumeAt(*static_cast<Location*>(h.loc), h.event);
      more = Advance(h, reader, from, to);
    } while (more && (h.event.ts < bound || (h.event.ts == bound && earlier)));
    if (more) {
      live_ts[best] = h.event.ts;
    } else {
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(best));
      live_ts.erase(live_ts.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
}

template void Feed<Engine::Impl>(const format::TraceReader&,
                                 const ClockAlignment&,
                                 uint64_t,
                                 uint64_t,
                                 Engine::Impl&);

}  // namespace parmon::analysis
