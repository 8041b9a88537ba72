// Matrices a program records with parmon_matrix (include/parmon/parmon.h, docs/events.md): one
// step of one matrix travels as one or more MatrixData events ("parts"), each holding a
// contiguous run of the elements in the order the program stored them. This is the one decoder
// of those events, used by `parmon dump`, `parmon info` and the web index; the runtime fills the
// same args (MatrixArgs) without linking this library.
//
// Args of MatrixData: matrix (a name id of category kMatrix), type (ElemType in bits 0-7,
// kColumnMajor set when the elements are column-major), rows, cols, step (the program's call
// number for this matrix in its process, from 0), offset (the index, in storage order, of the
// payload's first element). The payload is the raw elements, native byte order (little-endian
// on every platform parmon runs on).
#ifndef PARMON_SRC_FORMAT_MATRIX_H_
#define PARMON_SRC_FORMAT_MATRIX_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "format/event.h"
#include "format/matrix_layout.h"

namespace parmon::format {

const char* ElemTypeName(ElemType t);  // "int32", "int64", "float", "double"

// One decoded part.
struct MatrixPart {
  uint32_t matrix = 0;
  ElemType type = ElemType::kDouble;
  bool column_major = false;
  uint32_t rows = 0, cols = 0;
  uint64_t step = 0;
  uint64_t offset = 0;        // first element's index in storage order
  std::string_view elements;  // count() * ElemSize bytes
  uint32_t elem_size() const { return ElemSize(static_cast<uint64_t>(type)); }
  uint64_t count() const { return elements.size() / elem_size(); }
  uint64_t total() const { return uint64_t{rows} * cols; }
  double At(uint64_t i) const;  // the i-th element of the part as a double
};

// Checks every field against the others and the payload: one sentence when the event is not a
// well-formed part (wrong kind or arg count, unknown type, zero or oversized shape, a payload
// that is empty, not whole elements, or runs past the matrix's end).
StatusOr<MatrixPart> DecodeMatrixPart(const Event& e);

// The element at index `i` of raw little-endian bytes of type t, as a double.
double ElementAsDouble(ElemType t, const char* bytes, uint64_t i);

// `parmon dump`'s text: "<name> double 256x256 row-major step 3 elements 0..4095 of 65536:
// 1 0.5 ... " (the first few values).
std::string DescribeMatrixPart(const MatrixPart& p, const std::string& name);

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_MATRIX_H_
