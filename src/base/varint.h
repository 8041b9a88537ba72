// LEB128 varints and zigzag: the integer encoding of trace chunk payloads.
#ifndef PARMON_SRC_BASE_VARINT_H_
#define PARMON_SRC_BASE_VARINT_H_

#include <cstddef>
#include <cstdint>

namespace parmon {

constexpr size_t kMaxVarintBytes = 10;

// Writes v at p (which must have kMaxVarintBytes of room); returns the byte after it.
inline uint8_t* PutVarint(uint8_t* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<uint8_t>(v) | 0x80;
    v >>= 7;
  }
  *p++ = static_cast<uint8_t>(v);
  return p;
}

// Reads a varint from [p, end). Returns nullptr on truncated or over-long input.
inline const uint8_t* GetVarint(const uint8_t* p, const uint8_t* end, uint64_t* v) {
  if (p < end && *p < 0x80) {
    *v = *p;
    return p + 1;
  }
  if (end - p >= 2 && p[1] < 0x80) {  // two bytes: small time deltas, ids
    *v = (p[0] & 0x7fu) | (static_cast<uint64_t>(p[1]) << 7);
    return p + 2;
  }
  uint64_t result = 0;
  for (int shift = 0; shift <= 63 && p < end; shift += 7) {
    uint64_t byte = *p++;
    result |= (byte & 0x7f) << shift;
    if (byte < 0x80) {
      *v = result;
      return p;
    }
  }
  return nullptr;
}

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

}  // namespace parmon

#endif  // PARMON_SRC_BASE_VARINT_H_
