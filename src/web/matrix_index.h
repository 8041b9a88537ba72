// web::MatrixIndex: the matrices a program recorded with parmon_matrix (MatrixData parts,
// format/matrix.h), gathered once while the TraceIndex is built and kept in memory, so that a
// `parmon view` query for one step of one matrix is answered from memory, never by reading the
// trace again.
//
// A matrix is one registered name recorded with one shape, type and layout (a program that
// changes a name's shape gets one entry per shape). Its steps are kept in the order of their
// step numbers, each with its time, the location that recorded it and its raw elements in the
// order the program stored them; parts lost in the ring (`--overflow drop`) leave the step
// incomplete, their elements shown as missing. Memory: the elements as recorded (8 bytes per
// double) plus about 100 bytes per step, at most kMaxKeptBytes in all: the steps beyond that are
// listed but their elements not kept (one sentence when asked for).
#ifndef PARMON_SRC_WEB_MATRIX_INDEX_H_
#define PARMON_SRC_WEB_MATRIX_INDEX_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "format/matrix.h"

namespace parmon::web {

struct MatrixStep {
  uint64_t step = 0;      // the program's call number (MatrixData.step)
  uint64_t ts = 0;        // session clock ns of the call
  uint32_t location = 0;  // the thread that recorded it
  uint64_t filled = 0;    // elements received
  bool kept = true;       // false: over kMaxKeptBytes, elements not kept
  std::string bytes;      // rows * cols elements in storage order (zeros where missing)
  std::vector<std::pair<uint64_t, uint64_t>> present;  // received [first, end) element ranges
};

struct RecordedMatrix {
  uint32_t id = 0;  // the name's string id
  std::string name;
  format::ElemType type = format::ElemType::kDouble;
  bool column_major = false;
  uint32_t rows = 0, cols = 0;
  std::vector<MatrixStep> steps;  // by step number
};

// One step downsampled to at most w x h blocks of by x bx elements (row-major blocks; the last
// row and column of blocks may be smaller). A block with no finite element present has n == 0.
struct MatrixTile {
  uint32_t block_rows = 1, block_cols = 1;  // elements per block, down and across
  uint32_t out_rows = 0, out_cols = 0;
  std::vector<double> min, max, mean;  // out_rows * out_cols, row-major
  std::vector<uint32_t> n;             // finite elements per block
  double lo = 0, hi = 0;               // the step's finite value range (0, 0 when none)
  double abs_lo = 0;                   // smallest non-zero |value| (0 when none)
  uint64_t missing = 0;                // elements lost (not received)
  uint64_t non_finite = 0;             // NaN or infinite elements, left out of the blocks
};

class MatrixIndex {
 public:
  static constexpr uint64_t kMaxKeptBytes = uint64_t{1} << 30;

  // One MatrixData event of `location` at `ts`; a part that does not decode is counted.
  void Add(const format::Event& e, const std::string& name);
  void Finish();  // sorts the steps; call once after the last Add

  const std::vector<RecordedMatrix>& matrices() const { return matrices_; }
  uint64_t unreadable_parts() const { return unreadable_; }
  const std::string& first_problem() const { return first_problem_; }

  // Element (r, c) of a kept step as a double; nullopt when it was not received.
  static std::optional<double> At(const RecordedMatrix& m,
                                  const MatrixStep& s,
                                  uint32_t r,
                                  uint32_t c);
  static MatrixTile Downsample(const RecordedMatrix& m,
                               const MatrixStep& s,
                               uint32_t max_w,
                               uint32_t max_h);

 private:
  using Key = std::tuple<uint32_t, uint8_t, bool, uint32_t, uint32_t>;
  std::map<Key, size_t> by_key_;
  std::vector<RecordedMatrix> matrices_;
  std::vector<std::map<uint64_t, MatrixStep>> building_;  // per matrix, by step number
  uint64_t kept_bytes_ = 0, unreadable_ = 0;
  std::string first_problem_;
};

}  // namespace parmon::web

#endif  // PARMON_SRC_WEB_MATRIX_INDEX_H_
