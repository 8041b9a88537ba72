// Results helpers (results.h): state names, sums, lookups, and the automatic interval length.
#include "analysis/results.h"
#include "analysis/engine.h"

namespace parmon::analysis {

const char* StateName(State s) {
  static const char* const kNames[kStateCount] = {
      "running", "runnable", "comm_wait", "lock_wait", "timer_wait", "io_wait", "other"};
  return kNames[static_cast<int>(s)];
}

const char* StateLabel(State s) {
  static const char* const kLabels[kStateCount] = {"run",   "queue", "comm", "lock",
                                                   "timer", "io",    "other"};
  return kLabels[static_cast<int>(s)];
}

const char* WaitPatternName(WaitPattern p) {
  static const char* const kNames[] = {"late sender",    "late receiver", "wait at barrier",
                                       "wait at N-to-N", "blocked send",  "blocked receive"};
  return kNames[static_cast<int>(p)];
}

uint64_t Sum(const StateTimes& t) {
  uint64_t n = 0;
  for (uint64_t v : t)
    n += v;
  return n;
}

int Results::LocationIndex(uint32_t id) const {
  for (size_t i = 0; i < locations.size(); ++i)
    if (locations[i].id == id)
      return static_cast<int>(i);
  return -1;
}

uint64_t AutoInterval(uint64_t window_ns) {
  // Round lengths 1-2-5 x 10^k ns, the smallest giving at most kAutoIntervals intervals.
  uint64_t step = 1000;  // 1 us at least
  for (;;) {
    for (uint64_t m : {1, 2, 5}) {
      uint64_t iv = step * m;
      if (window_ns / iv < kAutoIntervals)
        return iv;
    }
    step *= 10;
  }
}

}  // namespace parmon::analysis
