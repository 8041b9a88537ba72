// The JSON API's handlers (api.h; the answers are documented in docs/http-api.md). Times in the
// API are ns from the session start (TraceIndex::start()).
#include "web/api.h"

#include <algorithm>
#include <charconv>
#include <initializer_list>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace parmon::web {

namespace {

using nlohmann::json;

ApiResponse Json(const json& j) {
  ApiResponse r;
  r.body = j.dump(-1, ' ', false,
                  json::error_handler_t::replace);  // names from a trace may be bad UTF-8
  return r;
}

// Splits "a=1&b=2"; false (with *error) on a malformed, repeated or unknown parameter.
template <class Params>
bool ParseQuery(std::string_view q,
                std::initializer_list<std::string_view> known,
                Params* out,
                std::string* error) {
  while (!q.empty()) {
    const size_t amp = q.find('&');
    std::string_view part = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (part.empty())
      continue;
    const size_t eq = part.find('=');
    std::string_view key = part.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? "" : part.substr(eq + 1);
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      *error =
          "The parameter '" + std::string(key.substr(0, 40)) + "' is not one this query takes.";
      return false;
    }
    if (!out->emplace(std::string(key), std::string(value)).second) {
      *error = "The parameter '" + std::string(key) + "' is given twice.";
      return false;
    }
  }
  return true;
}

}  // namespace

// A decimal integer parameter in [lo, hi], or `fallback` when absent.
bool NumberParam(const std::map<std::string, std::string, std::less<>>& p,
                 const char* key,
                 uint64_t fallback,
                 uint64_t lo,
                 uint64_t hi,
                 uint64_t* out,
                 std::string* error) {
  auto it = p.find(key);
  if (it == p.end()) {
    *out = fallback;
    return true;
  }
  const std::string& v = it->second;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) {
    *error = std::string("The parameter '") + key + "' must be a non-negative decimal integer.";
    return false;
  }
  if (*out < lo || *out > hi) {
    *error = std::string("The parameter '") + key + "' must be between " + std::to_string(lo) +
             " and " + std::to_string(hi) + ".";
    return false;
  }
  return true;
}

// The range parameters t0 and t1 (ns from the session start; t1 defaults to the end).
bool RangeParams(const std::map<std::string, std::string, std::less<>>& p,
                 uint64_t duration,
                 uint64_t* t0,
                 uint64_t* t1,
                 std::string* error) {
  constexpr uint64_t kFar = uint64_t{1} << 62;
  if (!NumberParam(p, "t0", 0, 0, kFar, t0, error) ||
      !NumberParam(p, "t1", std::max<uint64_t>(duration, 1), 0, kFar, t1, error))
    return false;
  if (*t0 >= *t1) {
    *error = "The range must have t0 < t1.";
    return false;
  }
  return true;
}

namespace {

constexpr auto Number = NumberParam;
constexpr auto Range = RangeParams;

int Dominant(const StateNs& s) {
  return static_cast<int>(std::max_element(s.begin(), s.end()) - s.begin());
}

// The bucket edges of [t0, t1) cut in px: edge i = t0 + i (t1 - t0) / px.
uint64_t Edge(uint64_t t0, uint64_t t1, uint64_t px, uint64_t i) {
  return t0 + static_cast<uint64_t>(static_cast<unsigned __int128>(t1 - t0) * i / px);
}

// Answers with a row per location are written directly, not through json objects: a timeline
// has up to ~100000 numbers per row, and building them as json values took most of the
// request's time; so did fmt::format_to through a string's back_inserter (half of a 1 MB
// timeline's time), hence these.
void AppendNumber(std::string* out, uint64_t n) {
  char digits[20];
  out->append(digits, std::to_chars(digits, digits + sizeof digits, n).ptr);
}

// '[' a,b,... ']' (with the separator before each but the first).
void AppendList(std::string* out, std::initializer_list<uint64_t> values) {
  out->push_back('[');
  for (const uint64_t* v = values.begin(); v != values.end(); ++v) {
    if (v != values.begin())
      out->push_back(',');
    AppendNumber(out, *v);
  }
  out->push_back(']');
}

void Append(std::string* out, const StateNs& ns) {
  out->push_back('[');
  for (int s = 0; s < kStates; ++s) {
    if (s)
      out->push_back(',');
    AppendNumber(out, ns[s]);
  }
  out->push_back(']');
}

// Runs of buckets with the same dominant state, as a JSON array of
// [begin, end, state, [ns per state]].
void AppendStateRuns(std::string* out,
                     const StateSeries& series,
                     uint64_t origin,
                     uint64_t t0,
                     uint64_t t1,
                     uint64_t px) {
  out->push_back('[');
  const size_t empty_size = out->size();
  if (series.empty()) {
    out->push_back(']');
    return;
  }
  size_t hint = 0;
  StateNs prev = series.Cumulative(origin + t0, &hint);
  StateNs acc{};
  int acc_state = -1;
  uint64_t acc_begin = 0, acc_end = 0;
  auto flush = [&] {
    if (acc_state >= 0) {
      if (out->size() > empty_size)
        out->push_back(',');
      out->push_back('[');
      AppendNumber(out, acc_begin);
      out->push_back(',');
      AppendNumber(out, acc_end);
      out->push_back(',');
      AppendNumber(out, static_cast<uint64_t>(acc_state));
      out->push_back(',');
      Append(out, acc);
      out->push_back(']');
    }
    acc_state = -1;
  };
  for (uint64_t i = 0; i < px; ++i) {
    const uint64_t b = Edge(t0, t1, px, i), e = Edge(t0, t1, px, i + 1);
    const StateNs next = series.Cumulative(origin + e, &hint);
    StateNs d;
    uint64_t total = 0;
    for (int s = 0; s < kStates; ++s)
      total += d[s] = next[s] - prev[s];
    prev = next;
    if (total == 0) {
      flush();
      continue;
    }
    const int state = Dominant(d);
    if (state != acc_state || acc_end != b) {
      flush();
      acc = StateNs{};
      acc_state = state;
      acc_begin = b;
    }
    for (int s = 0; s < kStates; ++s)
      acc[s] += d[s];
    acc_end = e;
  }
  flush();
  out->push_back(']');
}

// Writes `KEY:[...],"hidden":H,"truncated":B` for the slices of `set` at least min_ns long
// overlapping [t0, t1) (ns from origin), each as [begin, end, ...] (see docs/http-api.md).
void AppendSlices(std::string* out,
                  const SliceSet* set,
                  const char* key,
                  uint64_t origin,
                  uint64_t t0,
                  uint64_t t1,
                  uint64_t min_ns,
                  size_t limit,
                  bool cpu) {
  fmt::format_to(std::back_inserter(*out), ",\"{}\":[", key);
  const size_t first = out->size();
  bool truncated = false;
  uint64_t hidden = 0;
  if (set)
    hidden = set->Query(
        origin + t0, origin + t1, min_ns, limit,
        [&](const Slice& s) {
          const uint64_t b = s.begin - std::min(s.begin, origin),
                         e = s.end - std::min(s.end, origin);
          if (out->size() > first)
            out->push_back(',');
          if (cpu)  // [begin, end, thread, preempted]
            AppendList(out, {b, e, s.name, s.depth});
          else  // [begin, end, depth, kind, name]
            AppendList(out, {b, e, s.depth, static_cast<uint64_t>(s.kind), s.name});
        },
        &truncated);
  fmt::format_to(std::back_inserter(*out), "],\"hidden\":{},\"truncated\":{}}}", hidden, truncated);
}

}  // namespace

ApiResponse ErrorResponse(int status, const std::string& sentence) {
  ApiResponse r;
  r.status = status;
  r.body = json{{"error", sentence}}.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

Api::Api(const TraceIndex& index, const analysis::Results& results)
    : index_(index), results_(results) {
  for (const analysis::LocationResult& l : results.locations) {
    if (l.type != analysis::LocationKind::kThread)
      continue;
    row_of_id_[l.id] = rows_.size();
    rows_.push_back({l.id, &l, index.Find(l.id)});
  }
}

ApiResponse Api::Handle(std::string_view target) const {
  const size_t qm = target.find('?');
  const std::string_view path = target.substr(0, qm);
  const std::string_view query = qm == std::string_view::npos ? "" : target.substr(qm + 1);
  Params p;
  std::string error;
  auto parse = [&](std::initializer_list<std::string_view> known) {
    return ParseQuery(query, known, &p, &error);
  };
  if (path == "/api/session")
    return parse({}) ? Session() : ErrorResponse(400, error);
  if (path == "/api/timeline")
    return parse({"t0", "t1", "px", "rows"}) ? Timeline(p) : ErrorResponse(400, error);
  if (path == "/api/cpus")
    return parse({"t0", "t1", "px"}) ? Cpus(p) : ErrorResponse(400, error);
  if (path == "/api/messages")
    return parse({"t0", "t1", "limit"}) ? Messages(p) : ErrorResponse(400, error);
  if (path == "/api/findings")
    return parse({}) ? Findings() : ErrorResponse(400, error);
  if (path == "/api/matrix")
    return parse({"t0", "t1"}) ? Matrix(p) : ErrorResponse(400, error);
  if (path == "/api/graph")
    return parse({"t0", "t1", "steps"}) ? Graph(p) : ErrorResponse(400, error);
  if (path == "/api/data")
    return parse({}) ? DataList() : ErrorResponse(400, error);
  if (path == "/api/data/step")
    return parse({"matrix", "step", "w", "h"}) ? DataStep(p) : ErrorResponse(400, error);
  return ErrorResponse(404, "There is no such API query; docs/http-api.md lists them.");
}

ApiResponse Api::Session() const {
  const analysis::Summary& s = results_.summary;
  json rows = json::array();
  for (const Row& r : rows_) {
    const analysis::LocationResult& l = *r.result;
    json row = {{"id", l.id},
                {"label", l.label},
                {"name", l.name},
                {"pid", l.pid},
                {"tid", l.tid},
                {"rank", l.rank},
                {"kind", l.kind},
                {"main_thread", l.main_thread},
                {"host", r.indexed ? index_.hosts()[r.indexed->host] : s.host},
                {"state_source", l.state_source},
                {"events", l.events},
                {"messages_sent", l.messages_sent},
                {"messages_received", l.messages_received},
                {"slices", r.indexed ? r.indexed->slices.size() : 0}};
    row["first"] =
        r.indexed && r.indexed->first >= index_.start() ? r.indexed->first - index_.start() : 0;
    row["last"] =
        r.indexed && r.indexed->last >= index_.start() ? r.indexed->last - index_.start() : 0;
    rows.push_back(std::move(row));
  }
  json cpus = json::array();
  for (const CpuRow& c : index_.cpus())
    cpus.push_back({{"cpu", c.cpu}, {"runs", c.runs.size()}});
  json states = json::array();
  for (int i = 0; i < kStates; ++i)
    states.push_back(kStateKeys[i]);
  return Json({{"file", s.file},
               {"command", s.command},
               {"host", s.host},
               {"origin_ns", index_.start()},
               {"start", 0},
               {"end", index_.end() - index_.start()},
               {"states", states},
               {"slice_kinds", {"region", "mpi", "wait", "cpu"}},
               {"names", index_.names()},
               {"rows", rows},
               {"cpus", cpus},
               {"counts",
                {{"events", index_.events()},
                 {"messages", index_.messages().size()},
                 {"rows", rows_.size()},
                 {"cpus", index_.cpus().size()},
                 {"findings", results_.findings.size()}}},
               {"max_px", kMaxPx}});
}

ApiResponse Api::Timeline(const Params& p) const {
  std::string error;
  uint64_t t0, t1, px;
  if (!Range(p, index_.end() - index_.start(), &t0, &t1, &error) ||
      !Number(p, "px", 1000, 1, kMaxPx, &px, &error))
    return ErrorResponse(400, error);
  std::vector<const Row*> rows;
  if (auto it = p.find("rows"); it != p.end()) {
    std::string_view list = it->second;
    while (!list.empty()) {
      const size_t comma = list.find(',');
      std::string_view item = list.substr(0, comma);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      uint32_t id = 0;
      auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
      auto row = ec == std::errc() && end == item.data() + item.size() ? row_of_id_.find(id)
                                                                       : row_of_id_.end();
      if (row == row_of_id_.end())
        return ErrorResponse(400, "The row '" + std::string(item.substr(0, 40)) +
                                      "' is not a location of this trace (see /api/session).");
      if (rows.size() == rows_.size())
        return ErrorResponse(400, "The parameter 'rows' names more rows than the trace has.");
      rows.push_back(&rows_[row->second]);
    }
  } else {
    for (const Row& r : rows_)
      rows.push_back(&r);
  }
  const uint64_t origin = index_.start();
  const uint64_t min_ns = std::max<uint64_t>(1, (t1 - t0 + px - 1) / px);
  const size_t slice_limit = 4 * px + 256;
  ApiResponse res;
  std::string& out = res.body;
  fmt::format_to(std::back_inserter(out),
                 "{{\"t0\":{},\"t1\":{},\"px\":{},\"bucket_ns\":{},\"rows\":[", t0, t1, px, min_ns);
  for (size_t k = 0; k < rows.size(); ++k) {
    const Row* r = rows[k];
    if (k)
      out.push_back(',');
    fmt::format_to(std::back_inserter(out), "{{\"id\":{},\"states\":", r->id);
    if (r->indexed)
      AppendStateRuns(&out, r->indexed->states, origin, t0, t1, px);
    else
      out += "[]";
    AppendSlices(&out, r->indexed ? &r->indexed->slices : nullptr, "slices", origin, t0, t1, min_ns,
                 slice_limit, false);
  }
  out += "]}";
  return res;
}

ApiResponse Api::Cpus(const Params& p) const {
  std::string error;
  uint64_t t0, t1, px;
  if (!Range(p, index_.end() - index_.start(), &t0, &t1, &error) ||
      !Number(p, "px", 1000, 1, kMaxPx, &px, &error))
    return ErrorResponse(400, error);
  const uint64_t origin = index_.start();
  const uint64_t min_ns = std::max<uint64_t>(1, (t1 - t0 + px - 1) / px);
  ApiResponse res;
  std::string& out = res.body;
  fmt::format_to(std::back_inserter(out),
                 "{{\"t0\":{},\"t1\":{},\"px\":{},\"bucket_ns\":{},\"cpus\":[", t0, t1, px, min_ns);
  for (const CpuRow& c : index_.cpus()) {
    if (&c != &index_.cpus().front())
      out.push_back(',');
    fmt::format_to(std::back_inserter(out), "{{\"cpu\":{},\"busy\":", c.cpu);
    AppendStateRuns(&out, c.busy, origin, t0, t1, px);
    AppendSlices(&out, &c.runs, "runs", origin, t0, t1, min_ns, 4 * px + 256, true);
  }
  out += "]}";
  return res;
}

ApiResponse Api::Messages(const Params& p) const {
  std::string error;
  uint64_t t0, t1, limit;
  if (!Range(p, index_.end() - index_.start(), &t0, &t1, &error) ||
      !Number(p, "limit", kDefaultMessages, 1, kMaxMessages, &limit, &error))
    return ErrorResponse(400, error);
  const uint64_t origin = index_.start();
  bool more = false;
  json out = json::array();
  for (const Message* m : index_.MessagesIn(origin + t0, origin + t1, limit, &more))
    out.push_back({m->from, m->to, m->send - std::min(m->send, origin),
                   m->recv - std::min(m->recv, origin), m->bytes, m->tag});
  return Json({{"t0", t0}, {"t1", t1}, {"messages", out}, {"more", more}});
}

ApiResponse Api::Findings() const {
  const uint64_t origin = index_.start(), duration = index_.end() - index_.start();
  json out = json::array();
  for (const analysis::Finding& f : results_.findings) {
    // The report names a finding's locations by label; its time range is the span of those
    // locations' communication (MPI calls but start-up and shut-down, blocking waits), or of
    // their whole activity when they have none: the results carry no finer range.
    json ids = json::array();
    uint64_t b = UINT64_MAX, e = 0, cb = UINT64_MAX, ce = 0;
    auto rel = [origin](uint64_t t) { return t - std::min(t, origin); };
    for (const Row& r : rows_) {
      if (std::find(f.subjects.begin(), f.subjects.end(), r.result->label) == f.subjects.end())
        continue;
      ids.push_back(r.id);
      if (!r.indexed)
        continue;
      if (r.indexed->last > r.indexed->first) {
        b = std::min(b, rel(r.indexed->first));
        e = std::max(e, rel(r.indexed->last));
      }
      if (r.indexed->comm_last > r.indexed->comm_first) {
        cb = std::min(cb, rel(r.indexed->comm_first));
        ce = std::max(ce, rel(r.indexed->comm_last));
      }
    }
    if (cb < ce) {
      b = cb;
      e = ce;
    }
    if (b >= e) {
      b = 0;
      e = std::max<uint64_t>(duration, 1);
    }
    out.push_back({{"id", f.id},
                   {"text", f.text},
                   {"evidence", f.evidence},
                   {"percent_of_run", f.percent_of_run},
                   {"time_at_stake_ns", f.time_at_stake_ns},
                   {"subjects", f.subjects},
                   {"rows", ids},
                   {"t0", b},
                   {"t1", e}});
  }
  return Json({{"findings", out}});
}

}  // namespace parmon::web
