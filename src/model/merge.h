// model::Merge: the events of a session's streams (all, or those a filter selects) in time
// order, on rank 0's clock when the session has several (ties: stream order, then the order in
// the stream). It is the one k-way merge of parmon, written for throughput: each stream holds one
// decompressed chunk and an EventDecoder that decodes only its next event (memory per stream is
// one raw chunk, flat in the event count), the heads sit in a flat array where a linear scan for
// the minimum beats a heap for a few streams, and the second-smallest head bounds a run of
// events taken from one stream without looking at the others again; from kTreeFrom live streams
// (a real MPI trace: ~50, interleaving in runs of a few events) Run uses a loser tree instead,
// which also takes a stream's run up to the runner-up without replaying the tree.
//
// Two ways to consume it: Run(fn) calls fn(event, stream) for each event, inlined into the loop
// (the analysis' way); Next(&event) hands out one event at a time (dump's way). Both can stop at
// a time bound (`until`: every event at or before it is delivered, the rest wait) and be called
// again later to continue, also after the reader has found more chunks of a growing input: a
// stream that ran out is looked at again on the next call. A damaged chunk is recorded in the
// reader's problems() and skipped.
#ifndef PARMON_SRC_MODEL_MERGE_H_
#define PARMON_SRC_MODEL_MERGE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "format/codec.h"
#include "format/event.h"
#include "model/session.h"

namespace parmon::model {

struct MergeFilter {
  std::optional<std::set<uint32_t>> locations;      // all when unset
  std::optional<std::set<format::Source>> sources;  // all but definitions when unset
  // Inclusive window on the aligned clock.
  uint64_t from_ts = 0;
  uint64_t to_ts = UINT64_MAX;
};

class Merge {
 public:
  explicit Merge(const Session& session, MergeFilter filter = {});
  Merge(const Merge&) = delete;
  Merge& operator=(const Merge&) = delete;

  // Calls fn(const format::Event&, StreamIndex) for every event up to `until` in merge order.
  template <class Fn>
  [[gnu::flatten]] void Run(Fn&& fn, uint64_t until = UINT64_MAX);
  // The next event up to `until`, or false (then more may come with a later bound, or from a
  // growing input). The payload view stays valid until the next call. *stream, when given, is
  // the event's stream.
  bool Next(format::Event* out, uint64_t until = UINT64_MAX, StreamIndex* stream = nullptr);
  // No stream has an event left in the window (for a growing input: none so far).
  bool done() const { return live_.empty(); }

 private:
  struct Head {
    StreamIndex stream = 0;
    size_t next_chunk = 0;
    std::vector<uint8_t> raw;
    format::EventDecoder decoder;
    format::Event event;
    const ClockMap* clock = nullptr;  // its file's clock against rank 0's, if not the same
    size_t clock_hint = 0;
    bool live = false;
    bool finished = false;  // past the window's end: never again
  };
  bool Selected(const format::Stream& s) const;
  // On the first call and when the bound changed: adds streams the reader found since, and
  // revives heads whose stream got more chunks.
  void Refresh(uint64_t until);
  void Insert(Head* h);
  // Moves past the event Next handed out last (kept until now: its payload view points into its
  // head's chunk).
  void AdvancePending();
  void Remove(size_t i);
  // Run's loop for many live streams: a loser tree (tournament) over (time, live index) replays
  // only the winner's path, log2(streams) compares per run of one stream's events instead of a
  // scan of every head per event. A real MPI trace has ~50 live streams whose events
  // interleave in runs of ~5 (bench/report_bench's halo trace).
  template <class Fn>
  void RunTree(Fn& fn, uint64_t until);
  static constexpr size_t kTreeFrom = 12;  // live streams from which RunTree beats the scan
  // Loads the next chunk in the window: false at the end of what the stream has.
  [[gnu::noinline]] bool NextChunk(Head& h);
  // The event's time and time args on rank 0's clock.
  [[gnu::noinline]] void Align(Head& h) const;
  bool Advance(Head& h) {
    do {
      while (h.decoder.Next(&h.event)) {
        if (h.clock) [[unlikely]]
          Align(h);
        if (h.event.ts >= from_) [[likely]]
          return true;
      }
    } while (NextChunk(h));
    return false;
  }

  const Session& session_;
  MergeFilter filter_;
  uint64_t from_ = 0;
  uint64_t to_ = UINT64_MAX;
  size_t streams_seen_ = 0;
  std::vector<std::unique_ptr<Head>> heads_;
  std::vector<Head*> live_;        // in stream order
  std::vector<uint64_t> live_ts_;  // live_[i]->event.ts, packed: the scan reads one cache line
  Head* pending_ = nullptr;        // Next's last head: advanced on the next call
  // Next's min-heap over the live heads by (time, stream) once there are kTreeFrom of them
  // (a scan per event over 2,000 threads' streams took dump 34 s for 4 M events); rebuilt when
  // the live set changed under it. While it is in use live_ts_ is not kept: Run refreshes it.
  std::vector<Head*> heap_;
  bool heap_valid_ = false;
  bool live_ts_stale_ = false;
  bool NextFromHeap(format::Event* out, uint64_t until, StreamIndex* stream);
  void DropHeapBack();
  // Hands out h's event unless it is past `until`; it is advanced on the next call.
  bool HandOut(Head& h, format::Event* out, uint64_t until, StreamIndex* stream);
  void SyncLiveTs();
  std::optional<uint64_t> last_until_;
};

template <class Fn>
void Merge::Run(Fn&& fn, uint64_t until) {
  AdvancePending();
  SyncLiveTs();
  heap_valid_ = false;
  Refresh(until);
  if (live_.size() >= kTreeFrom) {
    RunTree(fn, until);
    return;
  }
  while (!live_.empty()) {
    // The smallest head and the bound set by the second smallest.
    size_t best = 0;
    uint64_t best_ts = live_ts_[0];
    uint64_t bound = UINT64_MAX;
    size_t bound_index = SIZE_MAX;
    for (size_t i = 1; i < live_ts_.size(); ++i) {
      uint64_t t = live_ts_[i];
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
    if (best_ts > until)
      return;  // the rest waits for a later bound
    Head& h = *live_[best];
    // Take events while they sort before the bound (ties go to the earlier stream).
    const bool earlier = best < bound_index;
    bool more;
    do {
      if (h.event.ts > to_) {
        h.finished = true;
        more = false;
        break;
      }
      fn(static_cast<const format::Event&>(h.event), h.stream);
      more = Advance(h);
    } while (more && (h.event.ts < bound || (h.event.ts == bound && earlier)) &&
             h.event.ts <= until);
    if (more)
      live_ts_[best] = h.event.ts;
    else
      Remove(best);
  }
}

template <class Fn>
void Merge::RunTree(Fn& fn, uint64_t until) {
  const size_t n = live_.size();
  size_t k = 1;
  while (k < n)
    k <<= 1;
  // Leaf i is live_[i] (stream order); exhausted and padding leaves sort last. A leaf's key is
  // (time, tie) in one 128-bit number, tie the leaf index (+ k once exhausted, so that a live
  // stream at UINT64_MAX still comes first): one compare orders two leaves.
  using Key = unsigned __int128;
  auto key_of = [](uint64_t t, size_t tie) { return (static_cast<Key>(t) << 32) | tie; };
  std::vector<Key> key(k);
  for (size_t i = 0; i < k; ++i)
    key[i] = i < n ? key_of(live_ts_[i], i) : key_of(UINT64_MAX, i + k);
  auto exhausted = [&](size_t i) { return static_cast<uint32_t>(key[i]) >= k; };
  // loser[node] for internal nodes 1..k-1, loser[0] the overall winner.
  std::vector<uint32_t> loser(k), winner(2 * k);
  for (size_t i = 0; i < k; ++i)
    winner[k + i] = static_cast<uint32_t>(i);
  for (size_t node = k - 1; node >= 1; --node) {
    uint32_t a = winner[2 * node], b = winner[2 * node + 1];
    bool a_wins = key[a] < key[b];
    winner[node] = a_wins ? a : b;
    loser[node] = a_wins ? b : a;
  }
  loser[0] = winner[1];
  for (;;) {
    const uint32_t w = loser[0];
    if (exhausted(w))
      break;  // every stream is exhausted
    Head& h = *live_[w];
    // The runner-up is the smallest of the losers on the winner's path: the winner's events
    // that sort before it go out without replaying the tree (a real trace's stream has runs of
    // a few events between other streams' events).
    Key bound = ~Key{0};
    for (size_t node = (w + k) / 2; node >= 1; node /= 2)
      bound = std::min(bound, key[loser[node]]);
    bool stop = false;
    do {
      if (h.event.ts > until) {
        stop = true;  // the rest waits for a later bound
        break;
      }
      if (h.event.ts > to_) {
        h.finished = true;
        key[w] = key_of(UINT64_MAX, w + k);
        break;
      }
      fn(static_cast<const format::Event&>(h.event), h.stream);
      if (!Advance(h)) {
        key[w] = key_of(UINT64_MAX, w + k);
        break;
      }
      key[w] = key_of(h.event.ts, w);
    } while (key[w] < bound);
    if (stop)
      break;
    // Replay the winner's path with its new key held in registers.
    uint32_t cur = w;
    Key cur_key = key[w];
    for (size_t node = (w + k) / 2; node >= 1; node /= 2) {
      const uint32_t other = loser[node];
      const Key other_key = key[other];
      const bool swap = other_key < cur_key;
      loser[node] = swap ? cur : other;
      cur = swap ? other : cur;
      cur_key = swap ? other_key : cur_key;
    }
    loser[0] = cur;
  }
  for (size_t i = n; i-- > 0;) {
    if (exhausted(i))
      Remove(i);
    else
      live_ts_[i] = static_cast<uint64_t>(key[i] >> 32);
  }
}

}  // namespace parmon::model

#endif  // PARMON_SRC_MODEL_MERGE_H_
