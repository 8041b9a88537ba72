// The flight recorder of --overflow overwrite: encoded chunks kept in memory, newest last, within
// a byte budget; the chunks whose data starts earliest are evicted first. It keeps the exact
// bookkeeping the END record and the final RingLost events need: per (location, source) stream,
// how many events were evicted, and the counts carried by the Lost events among them (a Lost
// event is a report of earlier losses, not an event of the program, so evicting it moves its
// count into the stream's final RingLost instead of counting it as one overwritten event).
//
// Pure bookkeeping: no writer, no clock; the collector writes held() out at the end.
#ifndef PARMON_SRC_RECORDER_FLIGHT_RECORDER_H_
#define PARMON_SRC_RECORDER_FLIGHT_RECORDER_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "format/codec.h"
#include "recorder/loss_ledger.h"

namespace parmon::recorder {

struct HeldChunk {
  uint32_t location = 0;
  format::Source source = format::Source::kRuntime;
  uint64_t first_ts = 0, last_ts = 0;
  uint32_t count = 0;         // events in the chunk, Lost events included
  uint64_t lost_inside = 0;   // sum of the counts of the Lost events among them
  uint64_t lost_records = 0;  // how many Lost events are among them
  std::vector<uint8_t> bytes;
};

class FlightRecorder {
 public:
  struct StreamLoss {
    uint64_t overwritten = 0;  // program events evicted
    uint64_t lost_counts = 0;  // counts of the evicted Lost events
    // Late loss reports (NoteLateLoss): losses at a thread's end, after every chunk the window may
    // keep, so their RingLost is stamped then (late_ts, the newest), not at the session's start.
    uint64_t late = 0;
    uint64_t late_ts = 0;
  };
  using StreamKey = std::pair<uint32_t, format::Source>;

  explicit FlightRecorder(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // Keeps a chunk, then evicts the earliest-starting chunks until the held bytes fit the budget
  // (the newest chunk always stays). Evicted program events go to `ledger` too.
  void Hold(HeldChunk chunk, LossLedger* ledger);
  // A loss reported outside any chunk (a thread that ended while dropping, at `ts`): the stream
  // gets a RingLost of its own for it at the end, even if nothing was evicted.
  void NoteLateLoss(uint32_t location, format::Source source, uint64_t n, uint64_t ts);

  const std::vector<HeldChunk>& held() const { return held_; }
  uint64_t held_bytes() const { return held_bytes_; }
  const std::map<StreamKey, StreamLoss>& losses() const { return losses_; }
  uint64_t overwritten_total() const;

 private:
  uint64_t budget_;
  uint64_t held_bytes_ = 0;
  std::vector<HeldChunk> held_;
  std::map<StreamKey, StreamLoss> losses_;
};

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_FLIGHT_RECORDER_H_
