// RingDrainer: the consumer side of the ring protocol (runtime/shm_abi.h). It reads the events a
// thread has published, [tail, head), in place (an event that wraps around the ring's end is
// copied whole first), converts their ticks to session nanoseconds, hands them to a sink, and
// gives the space back with one release store of tail.
//
// It is separate from the Recorder so that tests can drive a real ring in one process (producers
// through libparmon, the drainer on another thread) under ThreadSanitizer.
#ifndef PARMON_SRC_RECORDER_DRAIN_H_
#define PARMON_SRC_RECORDER_DRAIN_H_

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "format/codec.h"
#include "format/event.h"
#include "recorder/segment.h"

namespace parmon::recorder {

// What RingDrainer::Drain hands events to (any class with these two members works; this base
// documents them and serves callers that want virtual dispatch).
class DrainSink {
 public:
  virtual ~DrainSink() = default;
  // The hot case: a kind with one arg and no payload (region enter/leave, trace events, markers).
  virtual void OnCompact(uint16_t kind, uint64_t ts, uint64_t arg) = 0;
  // Every other event; time args are already converted to ns. Payload views die after the call.
  virtual void OnEvent(format::Event& e) = 0;
};

// A sink that also exposes the stream encoder its compact events go to gets them in runs, straight
// into that encoder (no call per event); it hears of each run's end through AfterRun(), where it
// may cut a chunk. Its encoder() may change between runs.
template <typename Sink>
concept RunSink = requires(Sink& s) {
  { s.encoder() } -> std::same_as<format::StreamEncoder*>;
  s.AfterRun();
};

class RingDrainer {
 public:
  explicit RingDrainer(const Segment& segment);
  // Drains what ring `index` has published (up to slot `head_limit`, a head the caller loaded
  // before it decided how to judge the events). Returns the number of events. A template so the
  // per-event calls inline into the loop (the recorder's hottest code).
  template <typename Sink>
  size_t Drain(uint32_t index,
               const TickConversion& clock,
               Sink& sink,
               uint64_t head_limit = UINT64_MAX);
  // Records the producer could not have written (only a program that wrote over parmon's shared
  // memory causes these); each is counted as one lost event.
  uint64_t corruptions() const { return corruptions_; }

 private:
  // Slots per run of compact events: the encoder reserves 30 bytes per slot of a run, and the sink
  // checks its chunk size after each run.
  static constexpr uint64_t kRunSlots = 1024;
  static constexpr uint64_t kPrefetchSlots = 64;  // 16 cache lines ahead
  // No ring word: its slot count is 0, which a drain counts as a corruption, never as an event.
  static constexpr uint64_t kNoWord = 0;
  struct RingKind {  // what the drain loop needs of a kind, for the 256 kinds a ring can carry
    uint8_t nargs;
    bool compact_only;  // one arg, no payload: OnCompact
    // A compact ring event of this kind may go into a repeat run: no payload, and its args after
    // the first (the ring's 32-bit field) are 0 (format 2.1; MpiEnter without its site), and
    // none is a time (a run's zeros are absolute; an event's time args are relative, 3.0) or a
    // difference (4.0: a repeated event is not its kind's previous event).
    bool in_runs;
    uint32_t time_mask;
  };
  void DecodeGeneral(const shm::Slot* slots, uint64_t pos, uint16_t nslots, format::Event* e);

  const Segment& segment_;
  RingKind kinds_[256];
  std::vector<uint8_t> scratch_;  // an event that wraps around the ring's end, made whole
  format::Event event_;
  uint64_t corruptions_ = 0;
};

template <typename Sink>
size_t RingDrainer::Drain(uint32_t index,
                          const TickConversion& clock,
                          Sink& sink,
                          uint64_t head_limit) {
  shm::RingControl& ctl = segment_.rings()[index];
  // Acquire pairs with the producer's release store of head: slots below head are written.
  const uint64_t head = std::min(ctl.head.load(std::memory_order_acquire), head_limit);
  uint64_t tail = ctl.tail.load(std::memory_order_relaxed);
  const shm::Slot* slots = segment_.slots(ctl);
  const uint64_t mask = segment_.ring_slots() - 1;
  size_t n = 0;
  while (tail < head) {
    if constexpr (RunSink<Sink>) {
      // The hot case (a thread emitting region enters/leaves as fast as it can): one-slot compact
      // events until the run's end or the first other event.
      const uint64_t end = std::min(head, tail + kRunSlots);
      format::OneArgAppender run(sink.encoder(), end - tail);
      // Copies the loop keeps in registers (stores of encoded bytes could alias the originals).
      const TickConversion conv = clock;
      const RingKind* const kinds = kinds_;
      // The ring words of the last two events put (kNoWord: not yet), so that an event repeating
      // one of them (a loop entering and leaving one region) is known by one comparison.
      uint64_t word1 = kNoWord, word2 = kNoWord;
      for (; tail < end; ++tail) {
        // The slots were written on the producer's CPU: ask for them well before they are read.
        __builtin_prefetch(&slots[(tail + kPrefetchSlots) & mask]);
        const shm::Slot& s = slots[tail & mask];
        const uint64_t word = s.word;
        const uint64_t ts = conv.ToNs(s.tsc);
        if (word == word2) [[likely]] {
          if (word2 != kNoWord && run.PutTwoBackAgain(ts)) {
            std::swap(word1, word2);
            continue;
          }
        } else if (word == word1 && word1 != kNoWord) {
          if (run.PutOneBackAgain(ts)) {
            word2 = word1;
            continue;
          }
        }
        const uint8_t kind = shm::WordKind(word);
        if (shm::WordSlots(word) != 1 || (shm::WordFlags(word) & shm::kFlagGeneral) != 0 ||
            !kinds[kind].in_runs) [[unlikely]]
          break;
        run.Put(kind, ts, shm::WordField(word), kinds[kind].nargs - 1u);
        word2 = word1;
        word1 = word;
      }
      n += run.Done();
      sink.AfterRun();
      if (tail == end && tail < head)
        continue;
      if (tail >= head)
        break;
    }
    const shm::Slot& s = slots[tail & mask];
    const uint64_t word = s.word;
    const uint16_t nslots = shm::WordSlots(word);
    if (nslots == 0 || nslots > shm::kMaxEventSlots || tail + nslots > head) [[unlikely]] {
      ++corruptions_;
      tail = head;
      break;
    }
    const uint8_t kind = shm::WordKind(word);
    const RingKind& info = kinds_[kind];
    const uint64_t ts = clock.ToNs(s.tsc);
    if ((shm::WordFlags(word) & shm::kFlagGeneral) == 0 && info.compact_only) [[likely]] {
      sink.OnCompact(kind, ts, shm::WordField(word));
    } else {
      // One event reused (set in full but for the args past nargs, which no reader of an event
      // looks at): a fresh one per event cost a 100-byte clear per MPI call.
      format::Event& e = event_;
      e.kind = kind;
      e.ts = ts;
      e.location = 0;
      e.source = format::Source::kRuntime;
      e.payload = {};
      if ((shm::WordFlags(word) & shm::kFlagGeneral) == 0) {
        e.nargs = info.nargs;
        if (e.nargs > 0)
          e.args[0] = shm::WordField(word);
        for (int i = 1; i < e.nargs; ++i)
          e.args[i] = 0;
      } else {
        DecodeGeneral(slots, tail, nslots, &e);
        for (int i = 0; i < e.nargs; ++i)
          if (info.time_mask & (1u << i))
            e.args[i] = clock.ToNs(e.args[i]);
      }
      sink.OnEvent(e);
    }
    ++n;
    tail += nslots;
  }
  // Release hands the slots back: pairs with the producer's acquire load of tail.
  ctl.tail.store(tail, std::memory_order_release);
  return n;
}

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_DRAIN_H_
