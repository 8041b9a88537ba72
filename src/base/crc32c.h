// CRC-32C (Castagnoli), the checksum of every trace chunk. Uses the SSE4.2 instruction when the
// CPU has it, a table otherwise; both give the same value.
#ifndef PARMON_SRC_BASE_CRC32C_H_
#define PARMON_SRC_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace parmon {

uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace parmon

#endif  // PARMON_SRC_BASE_CRC32C_H_
