// The event feed: every event of a trace's analysis window, in time order across all streams,
// with the per-file clocks of a multi-recorder session put on rank 0's clock. This is the only
// place the analysis reads events from the reader; the analyzers see nothing but
// "dispatcher.ConsumeAt(location, event)" calls in time order, so the feed can be replaced by
// another merge (the shared one of src/model) without touching them.
//
// Clock alignment (docs/events.md): the MpiClockSync ping-pongs between rank 0 and each rank
// give each file's offset against rank 0, interpolated linearly between epochs.
#ifndef PARMON_SRC_ANALYSIS_FEED_H_
#define PARMON_SRC_ANALYSIS_FEED_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/results.h"
#include "format/reader.h"

namespace parmon::analysis {

// One recorder's clock against rank 0's: offsets (this clock minus rank 0's) measured at the
// MpiClockSync epochs, keyed by the time on this clock, interpolated linearly between epochs
// and held constant before the first and after the last.
struct ClockMap {
  std::vector<std::pair<uint64_t, double>> samples;  // by time

  // The offset at t; *hint is the segment last used (times of a stream mostly go forward).
  double At(uint64_t t, size_t* hint) const;
  // t on rank 0's clock.
  uint64_t Apply(uint64_t t, size_t* hint) const;
};

// The clocks of a session's files against rank 0's.
class ClockAlignment {
 public:
  // Measures them (one extra decoding pass over the runtime streams) when `align` is set and the
  // session has several files; otherwise every clock is taken as rank 0's.
  static ClockAlignment Measure(const format::TraceReader& reader, bool align);

  // The correction of a stream's file, or null when none is needed.
  const ClockMap* ClockOf(const format::Stream& st) const;
  // t of stream st on rank 0's clock.
  uint64_t Aligned(const format::Stream& st, uint64_t t) const;
  // Whether any correction is applied.
  bool aligned() const { return !file_clocks_.empty(); }
  // Every other recorder whose clock was measured, by rank.
  const std::vector<ClockOffset>& offsets() const { return offsets_; }

 private:
  std::vector<ClockMap> file_clocks_;  // by file; empty when no correction
  std::vector<ClockOffset> offsets_;
};

// Feeds every event with a time in [from, to] (rank 0's clock) to `d` in time order (ties:
// stream order, then position in the stream, as format::MergeCursor). The dispatcher provides
//   typename Dispatcher::Location* Resolve(uint32_t location_id)
//       called once per stream before the first event; the pointer must stay valid;
//   void ConsumeAt(typename Dispatcher::Location& loc, const format::Event& e)
//       called for each event in time order.
// Damaged chunks are recorded in reader.problems() and skipped. Instantiated in feed.cc for
// the engine (the dispatch is inlined into the merge loop there).
template <typename Dispatcher>
void Feed(const format::TraceReader& reader,
          const ClockAlignment& clocks,
          uint64_t from,
          uint64_t to,
          Dispatcher& d);

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_FEED_H_
