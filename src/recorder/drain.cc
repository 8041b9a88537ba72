#include "recorder/drain.h"

#include <algorithm>
#include <cstring>

namespace parmon::recorder {

RingDrainer::RingDrainer(const Segment& segment) : segment_(segment) {
  for (int k = 0; k < 256; ++k) {
    const auto& info = format::GetKindInfo(static_cast<uint16_t>(k));
    kinds_[k] = RingKind{
        info.nargs, info.nargs == 1 && !info.has_payload,
        info.nargs >= 1 && !info.has_payload && info.time_mask == 0 && info.delta_mask == 0,
        info.time_mask};
  }
}

void RingDrainer::DecodeGeneral(const shm::Slot* slots,
                                uint64_t pos,
                                uint16_t nslots,
                                format::Event* e) {
  const uint64_t ring_slots = segment_.ring_slots();
  const uint64_t mask = ring_slots - 1;
  const uint64_t bytes = uint64_t{nslots - 1u} * sizeof(shm::Slot);
  const uint64_t first = (pos + 1) & mask;
  const uint64_t n1 = std::min<uint64_t>(ring_slots - first, nslots - 1u);
  // The body is read where it lies (the slots stay the drain's until it releases the tail), or,
  // when it wraps around the ring's end, from a copy made whole.
  const uint8_t* body = reinterpret_cast<const uint8_t*>(slots + first);
  if (n1 < nslots - 1u) {
    if (scratch_.size() < bytes)
      scratch_.resize(bytes);
    std::memcpy(scratch_.data(), slots + first, n1 * sizeof(shm::Slot));
    std::memcpy(scratch_.data() + n1 * sizeof(shm::Slot), slots,
                (nslots - 1u - n1) * sizeof(shm::Slot));
    body = scratch_.data();
  }
  const uint64_t word = slots[pos & mask].word;
  uint8_t nargs = shm::WordArgCount(word);
  uint32_t size = shm::WordField(word);
  if (nargs > format::kMaxArgs || uint64_t{nargs} * 8 + size > bytes) {
    ++corruptions_;
    nargs = 0;
    size = 0;
  }
  e->nargs = nargs;
  for (unsigned i = 0; i < nargs; ++i)
    std::memcpy(&e->args[i], body + i * 8, 8);
  e->payload = std::string_view(reinterpret_cast<const char*>(body) + nargs * 8, size);
}

}  // namespace parmon::recorder
