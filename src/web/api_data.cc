// The data views' answers of the JSON API (docs/http-api.md): the matrices a program recorded
// with parmon_matrix (/api/data) and one step of one, downsampled to the size asked for
// (/api/data/step). Both read the TraceIndex's MatrixIndex, built once with the index.
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "web/api.h"

namespace parmon::web {

namespace {

using nlohmann::json;

constexpr uint64_t kMaxTile = 2048;  // blocks across or down in one answer
constexpr uint64_t kDefaultTile = 512;

ApiResponse JsonAnswer(const json& j) {
  ApiResponse r;
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// A block's figure, or null when the block holds no finite element.
json Cell(const MatrixTile& t, const std::vector<double>& v, size_t k) {
  return t.n[k] ? json(v[k]) : json(nullptr);
}

}  // namespace

ApiResponse Api::DataList() const {
  const MatrixIndex& mi = index_.matrices();
  json list = json::array();
  for (size_t i = 0; i < mi.matrices().size(); ++i) {
    const RecordedMatrix& m = mi.matrices()[i];
    json times = json::array(), calls = json::array(), locations = json::array();
    uint64_t incomplete = 0, not_kept = 0;
    for (const MatrixStep& s : m.steps) {
      times.push_back(s.ts > index_.start() ? s.ts - index_.start() : 0);
      calls.push_back(s.step);
      locations.push_back(s.location);
      incomplete += s.filled < uint64_t{m.rows} * m.cols;
      not_kept += !s.kept;
    }
    const uint32_t loc = m.steps.empty() ? 0 : m.steps.front().location;
    auto row = row_of_id_.find(loc);
    list.push_back({{"index", i},
                    {"name", m.name},
                    {"type", format::ElemTypeName(m.type)},
                    {"layout", m.column_major ? "column-major" : "row-major"},
                    {"rows", m.rows},
                    {"cols", m.cols},
                    {"location", loc},
                    {"label", row != row_of_id_.end() ? rows_[row->second].result->label
                                                      : "loc " + std::to_string(loc)},
                    {"steps", m.steps.size()},
                    {"times", times},
                    {"calls", calls},
                    {"locations", locations},
                    {"incomplete_steps", incomplete},
                    {"steps_not_kept", not_kept}});
  }
  json j = {{"matrices", list}, {"unreadable_parts", mi.unreadable_parts()}};
  if (mi.unreadable_parts())
    j["first_problem"] = mi.first_problem();
  return JsonAnswer(j);
}

ApiResponse Api::DataStep(const Params& p) const {
  const auto& matrices = index_.matrices().matrices();
  std::string error;
  uint64_t index = 0, step = 0, w = 0, h = 0;
  if (p.find("matrix") == p.end() || p.find("step") == p.end())
    return ErrorResponse(400, "The query needs 'matrix' and 'step' (see /api/data).");
  if (matrices.empty())
    return ErrorResponse(400, "This trace has no recorded matrices (parmon_matrix).");
  if (!NumberParam(p, "matrix", 0, 0, matrices.size() - 1, &index, &error))
    return ErrorResponse(400, error);
  const RecordedMatrix& m = matrices[index];
  if (!NumberParam(p, "step", 0, 0, m.steps.size() - 1, &step, &error) ||
      !NumberParam(p, "w", kDefaultTile, 1, kMaxTile, &w, &error) ||
      !NumberParam(p, "h", kDefaultTile, 1, kMaxTile, &h, &error))
    return ErrorResponse(400, error);
  const MatrixStep& s = m.steps[step];
  if (!s.kept)
    return ErrorResponse(400, "The elements of step " + std::to_string(step) + " of '" + m.name +
                                  "' were not kept: the view keeps at most 1 GiB of matrices.");
  const MatrixTile t =
      MatrixIndex::Downsample(m, s, static_cast<uint32_t>(w), static_cast<uint32_t>(h));
  // Blocks of one element: min and max would repeat the mean, so only the mean is sent.
  const bool blocks = t.block_rows > 1 || t.block_cols > 1;
  json mean = json::array(), min = json::array(), max = json::array();
  for (size_t k = 0; k < t.n.size(); ++k) {
    mean.push_back(Cell(t, t.mean, k));
    if (blocks) {
      min.push_back(Cell(t, t.min, k));
      max.push_back(Cell(t, t.max, k));
    }
  }
  json j = {{"matrix", index},
            {"name", m.name},
            {"step", step},
            {"call", s.step},
            {"time", s.ts > index_.start() ? s.ts - index_.start() : 0},
            {"location", s.location},
            {"rows", m.rows},
            {"cols", m.cols},
            {"block_rows", t.block_rows},
            {"block_cols", t.block_cols},
            {"out_rows", t.out_rows},
            {"out_cols", t.out_cols},
            {"range", {{"min", t.lo}, {"max", t.hi}, {"min_abs_nonzero", t.abs_lo}}},
            {"missing", t.missing},
            {"non_finite", t.non_finite},
            {"complete", t.missing == 0},
            {"mean", mean}};
  if (blocks) {
    j["min"] = std::move(min);
    j["max"] = std::move(max);
  }
  return JsonAnswer(j);
}

}  // namespace parmon::web
