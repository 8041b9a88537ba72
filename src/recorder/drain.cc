#include "recorder/drain.h"

#include <algorithm>
#include <cstring>

namespace parmon::recorder {

void RingDrainer::DecodeGeneral(const shm::Slot* slots, uint64_t pos, uint16_t nslots,
                                format::Event* e) {
  const uint64_t ring_slots = segment_.ring_slots();
  const uint64_t mask = ring_slots - 1;
  const uint64_t bytes = uint64_t{nslots - 1u} * sizeof(shm::Slot);
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  const uint64_t first = (pos + 1) & mask;
  const uint64_t n1 = std::min<uint64_t>(ring_slots - first, nslots - 1u);
  std::memcpy(scratch_.data(), slots + first, n1 * sizeof(shm::Slot));
  if (n1 < nslots - 1u)
    std::memcpy(scratch_.data() + n1 * sizeof(shm::Slot), slots,
                (nslots - 1u - n1) * sizeof(shm::Slot));
  const uint64_t word = slots[pos & mask].word;
  uint8_t nargs = shm::WordArgCount(word);
  uint32_t size = shm::WordField(word);
  if (nargs > format::kMaxArgs || uint64_t{nargs} * 8 + size > bytes) {
    ++corruptions_;
    nargs = 0;
    size = 0;
  }
  e->nargs = nargs;
  std::memcpy(e->args, scratch_.data(), uint64_t{nargs} * 8);
  e->payload = std::string_view(reinterpret_cast<const char*>(scratch_.data()) + nargs * 8, size);
}

size_t RingDrainer::Drain(uint32_t index, const TickConversion& clock, DrainSink& sink) {
  shm::RingControl& ctl = segment_.rings()[index];
  // Acquire pairs with the producer's release store of head: slots below head are written.
  const uint64_t head = ctl.head.load(std::memory_order_acquire);
  uint64_t tail = ctl.tail.load(std::memory_order_relaxed);
  const shm::Slot* slots = segment_.slots(ctl);
  const uint64_t mask = segment_.ring_slots() - 1;
  size_t n = 0;
  while (tail < head) {
    const shm::Slot& s = slots[tail & mask];
    const uint64_t word = s.word;
    const uint16_t nslots = shm::WordSlots(word);
    if (nslots == 0 || nslots > shm::kMaxEventSlots || tail + nslots > head) {
      ++corruptions_;
      tail = head;
      break;
    }
    const uint16_t kind = shm::WordKind(word);
    const uint64_t ts = clock.ToNs(s.tsc);
    const auto& info = format::GetKindInfo(kind);
    if ((shm::WordFlags(word) & shm::kFlagGeneral) == 0 && info.nargs == 1 && !info.has_payload) {
      sink.OnCompact(kind, ts, shm::WordField(word));
    } else {
      format::Event e;
      e.kind = kind;
      e.ts = ts;
      if ((shm::WordFlags(word) & shm::kFlagGeneral) == 0) {
        e.nargs = info.nargs;
        if (e.nargs > 0) e.args[0] = shm::WordField(word);
      } else {
        DecodeGeneral(slots, tail, nslots, &e);
        for (int i = 0; i < e.nargs; ++i)
          if (info.time_mask & (1u << i)) e.args[i] = clock.ToNs(e.args[i]);
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
