// The layout of MatrixData's args (format/matrix.h), header-only and free of the C++ library so
// that libparmon fills them without linking the format library.
#ifndef PARMON_SRC_FORMAT_MATRIX_LAYOUT_H_
#define PARMON_SRC_FORMAT_MATRIX_LAYOUT_H_

#include <stdint.h>

namespace parmon::format {

enum class ElemType : uint8_t { kInt32 = 1, kInt64 = 2, kFloat = 3, kDouble = 4 };
constexpr uint64_t kColumnMajor = 0x100;
constexpr int kMatrixArgs = 6;
// Elements per part: the payload of one part is at most this many bytes.
constexpr uint32_t kMatrixPartBytes = 32768;
// The largest matrix one call records (rows * cols * element size).
constexpr uint64_t kMatrixMaxBytes = uint64_t{1} << 28;

// Bytes per element of a type id (0 for an id that is not a type).
constexpr uint32_t ElemSize(uint64_t type) {
  switch (type) {
    case 1:
    case 3:
      return 4;
    case 2:
    case 4:
      return 8;
    default:
      return 0;
  }
}

inline void MatrixArgs(uint64_t* args,
                       uint32_t matrix,
                       uint64_t type_and_layout,
                       uint32_t rows,
                       uint32_t cols,
                       uint64_t step,
                       uint64_t offset) {
  args[0] = matrix;
  args[1] = type_and_layout;
  args[2] = rows;
  args[3] = cols;
  args[4] = step;
  args[5] = offset;
}

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_MATRIX_LAYOUT_H_
