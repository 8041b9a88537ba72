#include "recorder/flight_recorder.h"

#include <algorithm>

namespace parmon::recorder {

void FlightRecorder::Hold(HeldChunk chunk, LossLedger* ledger) {
  held_bytes_ += chunk.bytes.size();
  held_.push_back(std::move(chunk));
  while (held_bytes_ > budget_ && held_.size() > 1) {
    auto oldest = std::min_element(
        held_.begin(), held_.end(),
        [](const HeldChunk& a, const HeldChunk& b) { return a.first_ts < b.first_ts; });
    const uint64_t events = oldest->count - oldest->lost_records;
    StreamLoss& loss = losses_[{oldest->location, oldest->source}];
    loss.overwritten += events;
    loss.lost_counts += oldest->lost_inside;
    ledger->Add(oldest->location, events);
    held_bytes_ -= oldest->bytes.size();
    held_.erase(oldest);
  }
}

void FlightRecorder::NoteLateLoss(uint32_t location,
                                  format::Source source,
                                  uint64_t n,
                                  uint64_t ts) {
  StreamLoss& loss = losses_[{location, source}];
  loss.late += n;
  loss.late_ts = std::max(loss.late_ts, ts);
}

uint64_t FlightRecorder::overwritten_total() const {
  uint64_t sum = 0;
  for (const auto& [key, loss] : losses_)
    sum += loss.overwritten;
  return sum;
}

}  // namespace parmon::recorder
