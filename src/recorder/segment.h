// The recorder's side of the shared-memory segment (see runtime/shm_abi.h): creates it, sizes
// it, and removes its name when the session ends.
#ifndef PARMON_SRC_RECORDER_SEGMENT_H_
#define PARMON_SRC_RECORDER_SEGMENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "runtime/shm_abi.h"

namespace parmon::recorder {

struct SegmentOptions {
  uint64_t ring_bytes = 4u << 20;  // per thread; rounded up to a power of two of slots
  uint32_t ring_count = 1024;      // most threads alive at once
  shm::Overflow overflow = shm::Overflow::kBlock;
  bool ticks_are_tsc = true;
  // First id the runtime interns strings from. Recorders of one MPI job started per rank
  // (`mpirun parmon record`) use disjoint ranges so their files merge without renumbering.
  uint32_t first_string_id = 1;
  // Told to every process of the session through the header (shm::SegmentHeader).
  shm::RunMode run_mode = shm::RunMode::kTrace;
  uint64_t period_ns = 10'000'000;
};

class Segment {
 public:
  static StatusOr<std::unique_ptr<Segment>> Create(const SegmentOptions& options);
  ~Segment();
  const std::string& name() const { return name_; }  // the PARMON_SHM value
  shm::SegmentHeader* header() const { return header_; }
  shm::RingControl* rings() const { return shm::Rings(header_); }
  shm::Slot* slots(const shm::RingControl& r) const { return shm::RingSlots(header_, r); }
  uint64_t ring_slots() const { return header_->ring_slots; }
  // Removes the /dev/shm name (the mapping stays until destruction).
  void Unlink();
  // Removes the segments of recorders that are gone (killed with SIGKILL, they could not): names
  // parmon-<pid>-<hex> in /dev/shm whose pid is no process. Their ring pages would otherwise
  // hold memory until the machine restarts. Returns how many it removed. Create calls it.
  static int RemoveStale(const std::string& dir = "/dev/shm");

 private:
  Segment() = default;
  std::string name_;
  shm::SegmentHeader* header_ = nullptr;
  uint64_t size_ = 0;
  bool unlinked_ = false;
};

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_SEGMENT_H_
