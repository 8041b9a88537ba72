// Interval binning: the analysis window [start, end) cut into `count` intervals of `length` ns
// (the last one may be shorter). Every per-interval row of the analysis (thread states, inferred
// waits, link busy time, channel-endpoint busy time, sampled quantities spread over their span)
// is filled through Bins::Split, so the clipping and the walk across interval boundaries are
// written once. Header-only: it runs on the per-event path.
#ifndef PARMON_SRC_ANALYSIS_BINNING_H_
#define PARMON_SRC_ANALYSIS_BINNING_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace parmon::analysis {

struct Bins {
  uint64_t start = 0, end = 0;  // the window, session-clock ns
  uint64_t length = 1;          // of one interval, ns (> 0)
  size_t count = 1;             // >= 1

  // The window [start, end) with intervals of `length` ns (at least one interval).
  static Bins Of(uint64_t start, uint64_t end, uint64_t length) {
    Bins b;
    b.start = start;
    b.end = std::max(start, end);
    b.length = length ? length : 1;
    b.count = std::max<size_t>(1, static_cast<size_t>((b.end - b.start + b.length - 1) / b.length));
    return b;
  }

  // The part of [b, e) inside the window, ns.
  uint64_t Clip(uint64_t b, uint64_t e) const {
    b = std::max(b, start);
    e = std::min(e, end);
    return e > b ? e - b : 0;
  }
  // The interval holding t (times outside the window go to the first or last interval).
  size_t IntervalOf(uint64_t t) const {
    if (t <= start)
      return 0;
    return std::min(count - 1, static_cast<size_t>((t - start) / length));
  }
  uint64_t Begin(size_t i) const { return start + i * length; }
  uint64_t End(size_t i) const { return std::min(end, Begin(i) + length); }
  // The length of interval i, at least 1 (a divisor for fractions of it).
  uint64_t Span(size_t i) const { return End(i) > Begin(i) ? End(i) - Begin(i) : 1; }

  // Calls add(i, ns) for each interval i that [b, e), clipped to the window, overlaps, with the
  // ns of the overlap (in increasing i; nothing for an empty or outside span).
  template <typename Add>
  void Split(uint64_t b, uint64_t e, Add&& add) const {
    b = std::max(b, start);
    e = std::min(e, end);
    if (e <= b)
      return;
    size_t i = static_cast<size_t>((b - start) / length);
    while (b < e && i < count) {
      uint64_t stop = std::min(e, start + (i + 1) * length);
      add(i, stop - b);
      b = stop;
      ++i;
    }
  }
};

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_BINNING_H_
