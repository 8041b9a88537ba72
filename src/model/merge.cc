#include "model/merge.h"

#include <algorithm>

namespace parmon::model {

Merge::Merge(const Session& session, MergeFilter filter)
    : session_(session), filter_(std::move(filter)), from_(filter_.from_ts), to_(filter_.to_ts) {}

bool Merge::Selected(const format::Stream& s) const {
  if (filter_.locations && !filter_.locations->count(s.location))
    return false;
  if (filter_.sources ? !filter_.sources->count(s.source)
                      : s.source == format::Source::kDefinitions)
    return false;
  return true;
}

void Merge::Refresh(uint64_t until) {
  if (last_until_ && *last_until_ == until)
    return;
  last_until_ = until;
  const auto& streams = session_.streams();
  for (; streams_seen_ < streams.size(); ++streams_seen_) {
    const auto i = static_cast<StreamIndex>(streams_seen_);
    if (!Selected(streams[i]))
      continue;
    auto h = std::make_unique<Head>();
    h->stream = i;
    h->clock = session_.ClockOf(i);
    heads_.push_back(std::move(h));
  }
  for (auto& h : heads_) {
    if (h->live || h->finished)
      continue;
    // A stream that ran out is looked at again: a growing input may have more of it now.
    if (Advance(*h))
      Insert(h.get());
  }
}

void Merge::Insert(Head* h) {
  heap_valid_ = false;
  // live_ stays in stream order: ties go to the earlier stream.
  size_t i = 0;
  while (i < live_.size() && live_[i]->stream < h->stream)
    ++i;
  live_.insert(live_.begin() + static_cast<std::ptrdiff_t>(i), h);
  live_ts_.insert(live_ts_.begin() + static_cast<std::ptrdiff_t>(i), h->event.ts);
  h->live = true;
}

void Merge::Remove(size_t i) {
  heap_valid_ = false;
  live_[i]->live = false;
  live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
  live_ts_.erase(live_ts_.begin() + static_cast<std::ptrdiff_t>(i));
}

bool Merge::NextChunk(Head& h) {
  const format::TraceReader& reader = session_.reader();
  const format::Stream& stream = session_.streams()[h.stream];
  for (;;) {
    if (!h.decoder.error().empty()) {
      // Let the reader record the damaged chunk as a problem (what decoded was delivered).
      format::DecodedChunk scratch;
      (void)reader.ReadChunk(stream.chunks[h.next_chunk - 1], &scratch);
      h.decoder = {};
    }
    const format::ChunkRef* ref = nullptr;
    while (h.next_chunk < stream.chunks.size()) {
      const format::ChunkRef& r = stream.chunks[h.next_chunk++];
      size_t hint = 0;
      auto aligned = [&](uint64_t t) { return h.clock ? h.clock->Apply(t, &hint) : t; };
      if (aligned(r.header.last_ts) < from_)
        continue;
      if (aligned(r.header.first_ts) > to_) {
        h.finished = true;
        return false;
      }
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
    h.decoder = format::EventDecoder(h.raw.data(), h.raw.size(), ref->header.location,
                                     static_cast<format::Source>(ref->header.source),
                                     &reader.schema(), format::ChunkCoding(ref->header));
    return true;
  }
}

void Merge::Align(Head& h) const {
  format::Event& e = h.event;
  e.ts = h.clock->Apply(e.ts, &h.clock_hint);
  uint32_t mask = session_.reader().schema().time_mask(e.kind);
  for (int i = 0; mask && i < e.nargs; ++i, mask >>= 1)
    if ((mask & 1) && e.args[i] != 0 && e.args[i] != UINT64_MAX)
      e.args[i] = h.clock->Apply(e.args[i], &h.clock_hint);
}

void Merge::SyncLiveTs() {
  if (!live_ts_stale_)
    return;
  for (size_t i = 0; i < live_.size(); ++i)
    live_ts_[i] = live_[i]->event.ts;
  live_ts_stale_ = false;
}

namespace {
// The heap's order: std::push_heap keeps the largest first, so "later" sorts first; ties go to
// the earlier stream, as in the scan.
struct Later {
  template <class H>
  bool operator()(const H* a, const H* b) const {
    return a->event.ts != b->event.ts ? a->event.ts > b->event.ts : a->stream > b->stream;
  }
};
}  // namespace

// Takes the heap's top head (already moved to the back by pop_heap) out of the heap and the live
// set.
void Merge::DropHeapBack() {
  Head* h = heap_.back();
  heap_.pop_back();
  auto it = std::find(live_.begin(), live_.end(), h);
  SyncLiveTs();
  Remove(static_cast<size_t>(it - live_.begin()));
  heap_valid_ = true;  // the heap already lacks it
  live_ts_stale_ = true;
}

bool Merge::HandOut(Head& h, format::Event* out, uint64_t until, StreamIndex* stream) {
  if (h.event.ts > until)
    return false;
  *out = h.event;
  if (stream)
    *stream = h.stream;
  pending_ = &h;
  return true;
}

bool Merge::NextFromHeap(format::Event* out, uint64_t until, StreamIndex* stream) {
  if (!heap_valid_) {
    SyncLiveTs();
    heap_.assign(live_.begin(), live_.end());
    std::make_heap(heap_.begin(), heap_.end(), Later{});
    heap_valid_ = true;
  }
  live_ts_stale_ = true;
  while (!heap_.empty()) {
    Head& h = *heap_.front();
    if (h.event.ts > to_) {
      h.finished = true;
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      DropHeapBack();
      continue;
    }
    return HandOut(h, out, until, stream);
  }
  return false;
}

void Merge::AdvancePending() {
  if (!pending_)
    return;
  Head* h = pending_;
  pending_ = nullptr;
  if (heap_valid_ && !heap_.empty() && heap_.front() == h) {
    // Next's heap: re-place the head by its new time, or drop it.
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    if (Advance(*h)) {
      std::push_heap(heap_.begin(), heap_.end(), Later{});
      return;
    }
    DropHeapBack();
    return;
  }
  SyncLiveTs();
  for (size_t i = 0; i < live_.size(); ++i) {
    if (live_[i] != h)
      continue;
    if (Advance(*h))
      live_ts_[i] = h->event.ts;
    else
      Remove(i);
    return;
  }
}

bool Merge::Next(format::Event* out, uint64_t until, StreamIndex* stream) {
  AdvancePending();
  Refresh(until);
  if (live_.size() >= kTreeFrom)
    return NextFromHeap(out, until, stream);
  SyncLiveTs();
  heap_valid_ = false;  // the scan below advances heads behind the heap's back
  while (!live_.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < live_ts_.size(); ++i)
      if (live_ts_[i] < live_ts_[best])
        best = i;
    Head& h = *live_[best];
    if (h.event.ts > to_) {
      h.finished = true;
      Remove(best);
      continue;
    }
    return HandOut(h, out, until, stream);
  }
  return false;
}

}  // namespace parmon::model
