#include "recorder/drain.h"

#include <algorithm>
#include <cstring>

namespace parmon::recorder {

RingDrainer::RingDrainer(const Segment& segment) : segment_(segment) {
  for (int k = 0; k < 256; ++k) {
    const auto& info = format::GetKindInfo(static_cast<uint16_t>(k));
    kinds_[k] = RingKind{info.nargs, info.nargs == 1 && !info.has_payload,
                         info.nargs >= 1 && !info.has_payload && (info.time_mask & 1u) == 0,
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
  if (scratch_.size() < bytes)
    scratch_.resize(bytes);
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

}  // namespace parmon::recorder
