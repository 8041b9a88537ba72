// web::Api: the JSON answers of `parmon view` (docs/http-api.md), computed from a TraceIndex and
// the analysis Results of the same trace (the report's labels, ranks and findings). Pure: no
// sockets here, so the queries are tested without a server and the server only moves bytes.
//
// Every parameter is checked: numbers are plain decimal integers, t0 < t1, px in 1..kMaxPx,
// rows name known locations, no parameter unknown or given twice; anything else is a 400 with
// one sentence. Answers are bounded by px (about one entry per pixel per row), by the limits
// below, and by the number of rows.
#ifndef PARMON_SRC_WEB_API_H_
#define PARMON_SRC_WEB_API_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/results.h"
#include "web/trace_index.h"

namespace parmon::web {

constexpr uint64_t kMaxPx = 8192;
constexpr uint64_t kMaxMessages = 100000;
constexpr uint64_t kDefaultMessages = 2000;
constexpr uint64_t kMaxSteps = 1000;
constexpr uint64_t kDefaultSteps = 50;

struct ApiResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string location;  // a redirect's Location header (status 301), else empty
};

// One session's UI answers, as `parmon view` and `parmon serve --http` serve them: a stored
// trace indexed once (StoredView, stored_view.h) or a session followed as it grows (LiveView).
class ServedSession {
 public:
  virtual ~ServedSession() = default;
  // target: the request's path and query below the session ("/api/timeline?t0=0&t1=100").
  virtual ApiResponse Handle(std::string_view target) const = 0;
};

// A row of the execution barscope: a thread location as the report names it.
struct Row {
  uint32_t id = 0;
  const analysis::LocationResult* result = nullptr;
  const IndexedLocation* indexed = nullptr;
};

class Api {
 public:
  // Both must outlive the Api.
  Api(const TraceIndex& index, const analysis::Results& results);
  // target: the request's path and query ("/api/timeline?t0=0&t1=100&px=800").
  ApiResponse Handle(std::string_view target) const;
  const std::vector<Row>& rows() const { return rows_; }

 private:
  using Params = std::map<std::string, std::string, std::less<>>;
  ApiResponse Session() const;
  ApiResponse Timeline(const Params& p) const;
  ApiResponse Cpus(const Params& p) const;
  ApiResponse Messages(const Params& p) const;
  ApiResponse Findings() const;
  ApiResponse Matrix(const Params& p) const;  // api_links.cc
  ApiResponse Graph(const Params& p) const;   // api_links.cc

  // The data views (api_data.cc).
  ApiResponse DataList() const;
  ApiResponse DataStep(const Params& p) const;

  const TraceIndex& index_;
  const analysis::Results& results_;
  std::vector<Row> rows_;
  std::map<uint32_t, size_t> row_of_id_;
};

// One sentence as a JSON error answer.
ApiResponse ErrorResponse(int status, const std::string& sentence);

// The query-parameter readers the handlers share (api.cc): a decimal integer in [lo, hi] (or
// `fallback` when absent), and the range t0 < t1 (t1 defaulting to `duration`). False, with
// one sentence in *error, when malformed or out of range.
bool NumberParam(const std::map<std::string, std::string, std::less<>>& p,
                 const char* key,
                 uint64_t fallback,
                 uint64_t lo,
                 uint64_t hi,
                 uint64_t* out,
                 std::string* error);
bool RangeParams(const std::map<std::string, std::string, std::less<>>& p,
                 uint64_t duration,
                 uint64_t* t0,
                 uint64_t* t1,
                 std::string* error);

}  // namespace parmon::web

#endif  // PARMON_SRC_WEB_API_H_
