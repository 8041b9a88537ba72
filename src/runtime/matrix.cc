// parmon_matrix (include/parmon/parmon.h): a matrix step as MatrixData parts (format/matrix.h),
// each an ordinary general event through parmon_x_emit_at, all with the call's time.
#include <atomic>
#include <cstdint>

#include "format/kinds.h"
#include "format/matrix_layout.h"
#include "parmon/parmon.h"
#include "runtime/emit.h"
#include "runtime/internal.h"

#define PARMON_EXPORT extern "C" __attribute__((visibility("default")))

namespace parmon::runtime {
namespace {

static_assert(format::kMatrixPartBytes == PARMON_TRACE_DATA_MAX);
static_assert(format::kMatrixMaxBytes == PARMON_MATRIX_MAX_BYTES);

// Each matrix's next step, per process: open addressing on the matrix id (ids are never 0).
constexpr uint32_t kStepSlots = 1024;
struct StepSlot {
  std::atomic<uint32_t> id{0};
  std::atomic<uint64_t> next{0};
};
StepSlot g_steps[kStepSlots];
std::atomic<uint64_t> g_overflow_steps{0};  // matrices beyond the table share one count

uint64_t NextStep(uint32_t id) {
  uint32_t h = (id * 2654435761u) % kStepSlots;
  for (uint32_t probe = 0; probe < kStepSlots; ++probe, h = (h + 1) % kStepSlots) {
    uint32_t cur = g_steps[h].id.load(std::memory_order_acquire);
    if (cur == 0 && g_steps[h].id.compare_exchange_strong(cur, id, std::memory_order_acq_rel))
      cur = id;
    if (cur == id)
      return g_steps[h].next.fetch_add(1, std::memory_order_relaxed);
  }
  return g_overflow_steps.fetch_add(1, std::memory_order_relaxed);
}

int RecordMatrix(parmon_id matrix,
                 parmon_elem_type type,
                 uint32_t rows,
                 uint32_t cols,
                 const void* data,
                 uint64_t layout) {
  const uint32_t size = format::ElemSize(static_cast<uint64_t>(type));
  if (size == 0 || rows == 0 || cols == 0 || data == nullptr || matrix == 0)
    return PARMON_E_INVALID;
  const uint64_t total = uint64_t{rows} * cols;
  if (total > PARMON_MATRIX_MAX_BYTES / size)
    return PARMON_E_TOO_LARGE;
  const uint64_t step = NextStep(matrix);
  if (!parmon_x_enabled())
    return PARMON_E_INACTIVE;
  const uint64_t now = parmon_x_now();
  const uint64_t per_part = format::kMatrixPartBytes / size;
  const char* bytes = static_cast<const char*>(data);
  int result = PARMON_OK;
  for (uint64_t first = 0; first < total; first += per_part) {
    const uint64_t n = total - first < per_part ? total - first : per_part;
    uint64_t args[format::kMatrixArgs];
    format::MatrixArgs(args, matrix, static_cast<uint64_t>(type) | layout, rows, cols, step, first);
    const int rc = parmon_x_emit_at(now, static_cast<uint16_t>(format::Kind::kMatrixData), args,
                                    format::kMatrixArgs, bytes + first * size,
                                    static_cast<uint32_t>(n * size));
    if (rc == PARMON_E_INACTIVE)
      return rc;  // paused in the middle: the step stays incomplete
    if (rc != PARMON_OK)
      result = rc;
  }
  return result;
}

}  // namespace
}  // namespace parmon::runtime

PARMON_EXPORT parmon_id parmon_matrix_register(const char* name) {
  return parmon::runtime::Intern(name,
                                 static_cast<uint32_t>(parmon::format::StringCategory::kMatrix));
}
PARMON_EXPORT int parmon_matrix(parmon_id matrix,
                                parmon_elem_type type,
                                uint32_t rows,
                                uint32_t cols,
                                const void* data) {
  return parmon::runtime::RecordMatrix(matrix, type, rows, cols, data, 0);
}
PARMON_EXPORT int parmon_matrix_colmajor(parmon_id matrix,
                                         parmon_elem_type type,
                                         uint32_t rows,
                                         uint32_t cols,
                                         const void* data) {
  return parmon::runtime::RecordMatrix(matrix, type, rows, cols, data,
                                       parmon::format::kColumnMajor);
}
