// The MatrixData decoder (matrix.h).
#include "format/matrix.h"

#include <fmt/format.h>

#include <cstring>

namespace parmon::format {

const char* ElemTypeName(ElemType t) {
  switch (t) {
    case ElemType::kInt32:
      return "int32";
    case ElemType::kInt64:
      return "int64";
    case ElemType::kFloat:
      return "float";
    case ElemType::kDouble:
      return "double";
  }
  return "unknown";
}

namespace {
template <typename T>
double Load(const char* bytes, uint64_t i) {
  T v;
  std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
  return static_cast<double>(v);
}
}  // namespace

double ElementAsDouble(ElemType t, const char* bytes, uint64_t i) {
  switch (t) {
    case ElemType::kInt32:
      return Load<int32_t>(bytes, i);
    case ElemType::kInt64:
      return Load<int64_t>(bytes, i);
    case ElemType::kFloat:
      return Load<float>(bytes, i);
    case ElemType::kDouble:
      return Load<double>(bytes, i);
  }
  return 0;
}

double MatrixPart::At(uint64_t i) const {
  return ElementAsDouble(type, elements.data(), i);
}

StatusOr<MatrixPart> DecodeMatrixPart(const Event& e) {
  if (e.kind_enum() != Kind::kMatrixData)
    return Status::Error(fmt::format("event kind {} is not a MatrixData event", e.kind));
  if (e.nargs != kMatrixArgs)
    return Status::Error(
        fmt::format("a MatrixData event has {} args, not {}", e.nargs, kMatrixArgs));
  MatrixPart p;
  const uint64_t type = e.args[1] & 0xff;
  const uint32_t size = ElemSize(type);
  if (size == 0 || (e.args[1] & ~(0xff | kColumnMajor)) != 0)
    return Status::Error(
        fmt::format("a MatrixData event has element type {:#x}, which is not a type", e.args[1]));
  if (e.args[0] > UINT32_MAX || e.args[2] == 0 || e.args[2] > UINT32_MAX || e.args[3] == 0 ||
      e.args[3] > UINT32_MAX)
    return Status::Error(fmt::format("a MatrixData event has matrix {} of {} x {} elements",
                                     e.args[0], e.args[2], e.args[3]));
  const uint64_t total = e.args[2] * e.args[3];  // both < 2^32: no overflow
  if (total > kMatrixMaxBytes / size)
    return Status::Error(fmt::format("a MatrixData event has a {} x {} matrix, over {} bytes",
                                     e.args[2], e.args[3], kMatrixMaxBytes));
  if (e.payload.empty() || e.payload.size() % size != 0)
    return Status::Error(
        fmt::format("a MatrixData event carries {} bytes, not a whole number of {}-byte elements",
                    e.payload.size(), size));
  const uint64_t count = e.payload.size() / size;
  if (e.args[5] >= total || count > total - e.args[5])
    return Status::Error(
        fmt::format("a MatrixData event's elements {}..{} run past the end of its {} x {} matrix",
                    e.args[5], e.args[5] + count - 1, e.args[2], e.args[3]));
  p.matrix = static_cast<uint32_t>(e.args[0]);
  p.type = static_cast<ElemType>(type);
  p.column_major = (e.args[1] & kColumnMajor) != 0;
  p.rows = static_cast<uint32_t>(e.args[2]);
  p.cols = static_cast<uint32_t>(e.args[3]);
  p.step = e.args[4];
  p.offset = e.args[5];
  p.elements = e.payload;
  return p;
}

std::string DescribeMatrixPart(const MatrixPart& p, const std::string& name) {
  std::string s =
      fmt::format("{} {} {}x{} {} step {} elements {}..{} of {}:", name, ElemTypeName(p.type),
                  p.rows, p.cols, p.column_major ? "column-major" : "row-major", p.step, p.offset,
                  p.offset + p.count() - 1, p.total());
  constexpr uint64_t kShown = 8;
  for (uint64_t i = 0; i < std::min(p.count(), kShown); ++i)
    s += fmt::format(" {:.6g}", p.At(i));
  if (p.count() > kShown)
    s += " ...";
  return s;
}

}  // namespace parmon::format
