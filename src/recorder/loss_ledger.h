// The loss ledger: how many events each location lost, whatever lost them (a full ring in drop
// mode, a damaged ring slot, a flight recorder's eviction, a write error). It feeds the END
// record's lost_events / lost_by_location and the status line.
#ifndef PARMON_SRC_RECORDER_LOSS_LEDGER_H_
#define PARMON_SRC_RECORDER_LOSS_LEDGER_H_

#include <cstdint>
#include <map>
#include <string>

namespace parmon::recorder {

class LossLedger {
 public:
  // Adds n lost events of a location. n may be 0: the location then appears in the list with 0
  // (a flight recorder that evicted only loss reports of it).
  void Add(uint32_t location, uint64_t n) { by_location_[location] += n; }
  uint64_t total() const;
  uint64_t of(uint32_t location) const;
  // "loc:n;loc:n;" in location order: the END record's lost_by_location value.
  const std::map<uint32_t, uint64_t>& by_location() const { return by_location_; }

 private:
  std::map<uint32_t, uint64_t> by_location_;
};

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_LOSS_LEDGER_H_
