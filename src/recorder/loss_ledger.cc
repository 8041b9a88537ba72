#include "recorder/loss_ledger.h"

namespace parmon::recorder {

uint64_t LossLedger::total() const {
  uint64_t sum = 0;
  for (const auto& [loc, n] : by_location_)
    sum += n;
  return sum;
}

uint64_t LossLedger::of(uint32_t location) const {
  auto it = by_location_.find(location);
  return it == by_location_.end() ? 0 : it->second;
}

}  // namespace parmon::recorder
