// Shared by both forms of the distributed mergesort (mergesort.cc over MPI, mergesort_procs.cc
// over forked processes): the regions every node marks, and the hash of the self-check.
#ifndef PARMON_EXAMPLES_MERGESORT_SORT_COMMON_H_
#define PARMON_EXAMPLES_MERGESORT_SORT_COMMON_H_

#include <cstdint>

#include "common/example.h"

namespace mergesort {

inline const parmon_examples::Region& RegionSplit() {
  static const parmon_examples::Region r("split");
  return r;
}
inline const parmon_examples::Region& RegionLocal() {
  static const parmon_examples::Region r("sort_local");
  return r;
}
inline const parmon_examples::Region& RegionMerge() {
  static const parmon_examples::Region r("merge");
  return r;
}
inline const parmon_examples::Region& RegionWait() {
  static const parmon_examples::Region r("wait_child");
  return r;
}

// Summed over the keys, an order-independent fingerprint of the multiset.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

}  // namespace mergesort

#endif  // PARMON_EXAMPLES_MERGESORT_SORT_COMMON_H_
