// MatrixIndex (matrix_index.h): MatrixData parts gathered into steps, and one step downsampled.
#include "web/matrix_index.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace parmon::web {

void MatrixIndex::Add(const format::Event& e, const std::string& name) {
  auto decoded = format::DecodeMatrixPart(e);
  if (!decoded.ok()) {
    if (unreadable_++ == 0)
      first_problem_ = decoded.status().message();
    return;
  }
  const format::MatrixPart& p = *decoded;
  const Key key{p.matrix, static_cast<uint8_t>(p.type), p.column_major, p.rows, p.cols};
  auto [it, added] = by_key_.try_emplace(key, matrices_.size());
  if (added) {
    RecordedMatrix m;
    m.id = p.matrix;
    m.name = name;
    m.type = p.type;
    m.column_major = p.column_major;
    m.rows = p.rows;
    m.cols = p.cols;
    matrices_.push_back(std::move(m));
    building_.emplace_back();
  }
  auto [sit, new_step] = building_[it->second].try_emplace(p.step);
  MatrixStep& s = sit->second;
  const uint64_t bytes = p.total() * p.elem_size();
  if (new_step) {
    s.step = p.step;
    s.ts = e.ts;
    s.location = e.location;
    s.kept = kept_bytes_ + bytes <= kMaxKeptBytes;
    if (s.kept) {
      kept_bytes_ += bytes;
      s.bytes.assign(bytes, '\0');
    }
  }
  const uint64_t end = p.offset + p.count();
  if (s.kept)
    std::copy(p.elements.begin(), p.elements.end(), s.bytes.begin() + p.offset * p.elem_size());
  if (!s.present.empty() && s.present.back().second == p.offset)
    s.present.back().second = end;
  else
    s.present.emplace_back(p.offset, end);
  s.filled += p.count();
}

void MatrixIndex::Finish() {
  for (size_t i = 0; i < matrices_.size(); ++i) {
    for (auto& [step, s] : building_[i]) {
      // Ranges sorted and merged, so that a repeated part is not counted twice.
      std::sort(s.present.begin(), s.present.end());
      std::vector<std::pair<uint64_t, uint64_t>> merged;
      for (const auto& r : s.present) {
        if (!merged.empty() && r.first <= merged.back().second)
          merged.back().second = std::max(merged.back().second, r.second);
        else
          merged.push_back(r);
      }
      s.present = std::move(merged);
      s.filled = 0;
      for (const auto& r : s.present)
        s.filled += r.second - r.first;
      matrices_[i].steps.push_back(std::move(s));
    }
  }
  building_.clear();
}

namespace {
uint64_t StorageIndex(const RecordedMatrix& m, uint32_t r, uint32_t c) {
  return m.column_major ? uint64_t{c} * m.rows + r : uint64_t{r} * m.cols + c;
}
}  // namespace

std::optional<double> MatrixIndex::At(const RecordedMatrix& m,
                                      const MatrixStep& s,
                                      uint32_t r,
                                      uint32_t c) {
  if (!s.kept || r >= m.rows || c >= m.cols)
    return std::nullopt;
  const uint64_t i = StorageIndex(m, r, c);
  auto it = std::upper_bound(s.present.begin(), s.present.end(), std::make_pair(i, UINT64_MAX));
  if (it == s.present.begin() || std::prev(it)->second <= i)
    return std::nullopt;
  return format::ElementAsDouble(m.type, s.bytes.data(), i);
}

MatrixTile MatrixIndex::Downsample(const RecordedMatrix& m,
                                   const MatrixStep& s,
                                   uint32_t max_w,
                                   uint32_t max_h) {
  MatrixTile t;
  max_w = std::max<uint32_t>(max_w, 1);
  max_h = std::max<uint32_t>(max_h, 1);
  t.block_cols = (m.cols + max_w - 1) / max_w;
  t.block_rows = (m.rows + max_h - 1) / max_h;
  t.out_cols = (m.cols + t.block_cols - 1) / t.block_cols;
  t.out_rows = (m.rows + t.block_rows - 1) / t.block_rows;
  const size_t cells = size_t{t.out_rows} * t.out_cols;
  t.min.assign(cells, std::numeric_limits<double>::infinity());
  t.max.assign(cells, -std::numeric_limits<double>::infinity());
  t.mean.assign(cells, 0.0);
  t.n.assign(cells, 0);
  t.missing = uint64_t{m.rows} * m.cols - s.filled;
  if (!s.kept)
    return t;  // the caller says why; nothing to read
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, abs_lo = lo;
  for (const auto& [first, end] : s.present) {
    for (uint64_t i = first; i < end; ++i) {
      const double v = format::ElementAsDouble(m.type, s.bytes.data(), i);
      if (!std::isfinite(v)) {
        ++t.non_finite;
        continue;
      }
      const uint64_t r = m.column_major ? i % m.rows : i / m.cols;
      const uint64_t c = m.column_major ? i / m.rows : i % m.cols;
      const size_t cell = (r / t.block_rows) * t.out_cols + c / t.block_cols;
      t.min[cell] = std::min(t.min[cell], v);
      t.max[cell] = std::max(t.max[cell], v);
      t.mean[cell] += v;
      ++t.n[cell];
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      if (v != 0)
        abs_lo = std::min(abs_lo, std::fabs(v));
    }
  }
  for (size_t k = 0; k < cells; ++k)
    if (t.n[k])
      t.mean[k] /= t.n[k];
  if (hi >= lo) {
    t.lo = lo;
    t.hi = hi;
  }
  t.abs_lo = std::isfinite(abs_lo) ? abs_lo : 0;
  return t;
}

}  // namespace parmon::web
