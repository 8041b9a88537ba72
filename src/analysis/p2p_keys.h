// The per-message records' containers of the MPI point-to-point analyzer (mpi_p2p.cc): a pool
// of records referenced by index, and the hashed keys messages are matched and completed by.
// Sends and receives run millions of times per report; these keep them free of allocation.
#ifndef PARMON_SRC_ANALYSIS_P2P_KEYS_H_
#define PARMON_SRC_ANALYSIS_P2P_KEYS_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace parmon::analysis {

// Records referenced by index from a pool, recycled through a free list: the per-message
// analyzers run millions of times and would otherwise allocate and free on every message.
template <typename T>
struct Pool {
  std::vector<T> items;
  std::vector<uint32_t> free;
  uint32_t Take() {
    if (!free.empty()) {
      uint32_t i = free.back();
      free.pop_back();
      return i;
    }
    items.emplace_back();
    return static_cast<uint32_t>(items.size() - 1);
  }
  T& operator[](uint32_t i) { return items[i]; }
  const T& operator[](uint32_t i) const { return items[i]; }
};

// (source, destination, communicator, tag): the key MPI matches messages on.
struct MatchKey {
  int64_t src, dst;
  uint64_t comm, tag;
  bool operator==(const MatchKey&) const = default;
  // absl::Hash (the engine's absl::flat_hash_maps mix every bit; a hash of our own would have to).
  template <typename H>
  friend H AbslHashValue(H h, const MatchKey& k) {
    return H::combine(std::move(h), k.src, k.dst, k.comm, k.tag);
  }
};
struct MatchKeyHash {
  size_t operator()(const MatchKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.src) * 0x9E3779B97F4A7C15ULL;
    h = (h ^ static_cast<uint64_t>(k.dst)) * 0xC2B2AE3D27D4EB4FULL;
    h = (h ^ k.comm) * 0x165667B19E3779F9ULL;
    h = (h ^ k.tag) * 0x9E3779B97F4A7C15ULL;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};
// A nonblocking send's identity: request ids are per process.
struct RequestKey {
  uint32_t pid;
  uint64_t request;
  bool operator==(const RequestKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const RequestKey& k) {
    return H::combine(std::move(h), k.pid, k.request);
  }
};
// Nonblocking sends whose completion is never seen (a lost event, or a request handle the MPI
// library reuses) are kept at most this many; the oldest beyond it are dropped and counted.
constexpr size_t kMaxOpenSends = 16384;

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_P2P_KEYS_H_
