// String ids of per-rank sessions. Each rank's recorder interns names (MPI functions, regions,
// counters, call sites) from a range of its own, so that the rank files of one run merge into
// one session without renumbering: the reader keeps one table of strings by id. Ids from 2^31 up
// are the runtime's while nothing records (src/runtime/intern.cc), so the ranges share [1, 2^31):
// each rank gets the largest power of two that lets every rank of the job have its own range,
// at most 2^20 ids (a job of up to 2,048 ranks), at least 2^12 (a job of up to 524,288 ranks).
// Beyond that ranks K and K + 2^31 / 2^12 share a range. A rank interning more names than its
// range holds runs into the next rank's range.
#ifndef PARMON_SRC_FORMAT_STRING_IDS_H_
#define PARMON_SRC_FORMAT_STRING_IDS_H_

#include <cstdint>

namespace parmon::format {

constexpr uint32_t kRankStringIdsMax = 1u << 20, kRankStringIdsMin = 1u << 12;
constexpr uint32_t kRankStringIdsEnd = 1u << 31;

// How many string ids each rank of a job of `size` ranks draws from.
constexpr uint32_t RankStringIdSpan(uint32_t size) {
  uint32_t span = kRankStringIdsMax;
  while (span > kRankStringIdsMin && static_cast<uint64_t>(span) * size > kRankStringIdsEnd)
    span >>= 1;
  return span;
}

// The first string id of `rank` in a job of `size` ranks (size 0: unknown, taken as 2,048).
constexpr uint32_t RankFirstStringId(uint32_t rank, uint32_t size) {
  const uint32_t span = RankStringIdSpan(size == 0 ? kRankStringIdsEnd / kRankStringIdsMax : size);
  return 1 + (rank % (kRankStringIdsEnd / span)) * span;
}

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_STRING_IDS_H_
