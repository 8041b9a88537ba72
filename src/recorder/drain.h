// RingDrainer: the consumer side of the ring protocol (runtime/shm_abi.h). It copies the events a
// thread has published, [tail, head), converts their ticks to session nanoseconds, hands them to
// a sink, and gives the space back with one release store of tail.
//
// It is separate from the Recorder so that tests can drive a real ring in one process (producers
// through libparmon, the drainer on another thread) under ThreadSanitizer.
#ifndef PARMON_SRC_RECORDER_DRAIN_H_
#define PARMON_SRC_RECORDER_DRAIN_H_

#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "format/event.h"
#include "recorder/segment.h"

namespace parmon::recorder {

class DrainSink {
 public:
  virtual ~DrainSink() = default;
  // The hot case: a kind with one arg and no payload (region enter/leave, trace events, markers).
  virtual void OnCompact(uint16_t kind, uint64_t ts, uint64_t arg) = 0;
  // Every other event; time args are already converted to ns. Payload views die after the call.
  virtual void OnEvent(format::Event& e) = 0;
};

class RingDrainer {
 public:
  explicit RingDrainer(const Segment& segment) : segment_(segment) {}
  // Drains what ring `index` has published. Returns the number of events.
  size_t Drain(uint32_t index, const TickConversion& clock, DrainSink& sink);
  // Records the producer could not have written (only a program that wrote over parmon's shared
  // memory causes these); each is counted as one lost event.
  uint64_t corruptions() const { return corruptions_; }

 private:
  void DecodeGeneral(const shm::Slot* slots, uint64_t pos, uint16_t nslots, format::Event* e);

  const Segment& segment_;
  std::vector<uint8_t> scratch_;
  uint64_t corruptions_ = 0;
};

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_DRAIN_H_
