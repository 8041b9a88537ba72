#include "format/session_info.h"

#include <array>
#include <charconv>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace parmon::format {
namespace {

template <class T>
bool ParseNumber(std::string_view s, T* out) {
  if (s.empty())
    return false;
  const char* end = s.data() + s.size();
  T n{};
  auto [p, ec] = std::from_chars(s.data(), end, n);
  if (ec != std::errc() || p != end)
    return false;
  *out = n;
  return true;
}

// Reads typed values out of the key/value map, remembering which keys it used (the others are
// kept as extra values) and which held a value that is not what the key promises (those read
// as absent, and are named in one sentence).
class ValueReader {
 public:
  explicit ValueReader(const std::map<std::string, std::string>& kv) : kv_(kv) {}

  const std::string* Find(const char* key) {
    used_.insert(key);
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
  }
  void Text(const char* key, std::string* out) {
    if (const std::string* v = Find(key))
      *out = *v;
  }
  template <class T>
  void Number(const char* key, T* out) {
    const std::string* v = Find(key);
    // An empty value is what an absent one is (older recorders wrote some keys empty).
    if (v && !v->empty() && !ParseNumber(*v, out))
      Bad(key, fmt::format("'{}' is not a number ('{}')", key, *v));
  }
  template <class T>
  void Number(const char* key, std::optional<T>* out) {
    const std::string* v = Find(key);
    T n{};
    if (!v || v->empty())
      return;
    if (ParseNumber(*v, &n))
      *out = n;
    else
      Bad(key, fmt::format("'{}' is not a number ('{}')", key, *v));
  }
  // "a:b:...:n;" items: `fields` numbers separated by ':' each. One bad item makes the whole
  // list absent (a partial list would give wrong totals).
  template <class Fn>
  void List(const char* key, int fields, Fn&& add) {
    const std::string* v = Find(key);
    if (!v)
      return;
    std::vector<std::array<uint64_t, 3>> items;
    std::string_view rest = *v;
    while (!rest.empty()) {
      size_t semi = rest.find(';');
      std::string_view item = rest.substr(0, semi);
      rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
      if (item.empty())
        continue;
      std::array<uint64_t, 3> n = {};
      std::string_view part = item;
      int got = 0;
      for (; got < fields; ++got) {
        size_t colon = part.find(':');
        if ((colon == std::string_view::npos) != (got == fields - 1) ||
            !ParseNumber(part.substr(0, colon), &n[got]))
          break;
        part = colon == std::string_view::npos ? std::string_view() : part.substr(colon + 1);
      }
      if (got != fields) {
        Bad(key, fmt::format("'{}' has a bad item ('{}')", key, item));
        return;
      }
      items.push_back(n);
    }
    for (const auto& n : items)
      add(n.data());
  }
  void Bad(const char* key, std::string what) {
    bad_keys_.emplace_back(key);
    bad_.push_back(std::move(what));
  }
  std::vector<std::string> bad_keys() const { return bad_keys_; }
  // One sentence naming every bad value, or empty.
  std::string Warning() const {
    if (bad_.empty())
      return {};
    return fmt::format("bad session metadata: {}; {} read as absent", fmt::join(bad_, ", "),
                       bad_.size() == 1 ? "it is" : "they are");
  }
  std::map<std::string, std::string> Unused() const {
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : kv_)
      if (!used_.count(k))
        out.emplace(k, v);
    return out;
  }

 private:
  const std::map<std::string, std::string>& kv_;
  std::set<std::string> used_;
  std::vector<std::string> bad_keys_;
  std::vector<std::string> bad_;
};

void DecodeSession(ValueReader& r, SessionInfo* s) {
  r.Text("parmon_version", &s->parmon_version);
  r.Text("command", &s->command);
  r.Text("host", &s->host);
  r.Number("start_realtime_ns", &s->start_realtime_ns);
  r.Number("start_ts", &s->start_ts);
  r.Text("clock", &s->clock);
  r.Text("clock_base", &s->clock_base);
  r.Number("recorder_pid", &s->recorder_pid);
  r.Text("overflow", &s->overflow);
  r.Number("ring_bytes", &s->ring_bytes);
  r.Number("ring_count", &s->ring_count);
  r.Number("cpus", &s->cpus);
  r.Number("sample_period_ns", &s->sample_period_ns);
  r.Text("mode", &s->mode);
  r.Number("mpi_rank", &s->mpi_rank);
  r.Number("mpi_size", &s->mpi_size);
  r.Number("session_files", &s->session_files);
}

void DecodeEnd(ValueReader& r, EndInfo* e) {
  r.Number("end_ts", &e->end_ts);
  r.Number("exit_code", &e->exit_code);
  r.Number("lost_events", &e->lost_events);
  r.List("lost_by_location", 2,
         [&](const uint64_t* n) { e->lost_by_location[static_cast<uint32_t>(n[0])] += n[1]; });
  r.List("held_by_location", 2,
         [&](const uint64_t* n) { e->held_by_location[static_cast<uint32_t>(n[0])] += n[1]; });
  r.Number("overwritten_events", &e->overwritten_events);
  r.Number("unattached_lost_events", &e->unattached_lost_events);
  r.Number("ring_corruptions", &e->ring_corruptions);
  r.Number("recorder_cpu_ns", &e->recorder_cpu_ns);
  r.Number("children_cpu_ns", &e->children_cpu_ns);
  r.Number("event_cost_ns", &e->event_cost_ns);
  r.Number("sampler_passes", &e->sampler_passes);
  r.Number("sampler_overruns", &e->sampler_overruns);
  r.Number("sampler_cpu_ns", &e->sampler_cpu_ns);
  r.Number("switch_records", &e->switch_records);
  r.Number("switch_records_lost", &e->switch_records_lost);
  r.Number("switch_record_cost_ns", &e->switch_record_cost_ns);
  r.Number("calibration_cpu_ns", &e->calibration_cpu_ns);
  r.Number("events", &e->events);
  r.Number("index_offset", &e->index_offset);
  r.List("stream_totals", 3, [&](const uint64_t* n) {
    e->stream_totals[{static_cast<uint32_t>(n[0]), static_cast<Source>(n[1])}] += n[2];
  });
}

template <class T>
void AddIfSet(KeyValues* kv, const char* key, const T& v) {
  if (v != T{})
    kv->emplace_back(key, fmt::format("{}", v));
}

}  // namespace

KeyValues EncodeSession(const SessionInfo& s) {
  KeyValues kv = {
      {"parmon_version", s.parmon_version},
      {"command", s.command},
      {"host", s.host},
      {"start_realtime_ns", std::to_string(s.start_realtime_ns)},
      {"start_ts", std::to_string(s.start_ts)},
      {"clock", s.clock},
      {"clock_base", s.clock_base},
      {"recorder_pid", std::to_string(s.recorder_pid)},
      {"overflow", s.overflow},
      {"ring_bytes", std::to_string(s.ring_bytes)},
      {"ring_count", std::to_string(s.ring_count)},
      {"cpus", std::to_string(s.cpus)},
  };
  AddIfSet(&kv, "sample_period_ns", s.sample_period_ns);
  AddIfSet(&kv, "mode", s.mode);
  if (s.mpi_rank)
    kv.emplace_back("mpi_rank", std::to_string(*s.mpi_rank));
  AddIfSet(&kv, "mpi_size", s.mpi_size);
  AddIfSet(&kv, "session_files", s.session_files);
  for (const auto& [k, v] : s.extra)
    kv.emplace_back(k, v);
  return kv;
}

std::string EncodeLostByLocation(const std::map<uint32_t, uint64_t>& counts) {
  std::string out;
  for (const auto& [loc, n] : counts)
    out += fmt::format("{}:{};", loc, n);
  return out;
}

std::string EncodeStreamTotals(const std::map<StreamKey, uint64_t>& totals) {
  std::string out;
  for (const auto& [key, n] : totals)
    out += fmt::format("{}:{}:{};", key.first, static_cast<int>(key.second), n);
  return out;
}

KeyValues EncodeEnd(const EndInfo& e) {
  KeyValues kv = {{"end_ts", std::to_string(e.end_ts)}};
  if (e.exit_code)
    kv.emplace_back("exit_code", std::to_string(*e.exit_code));
  kv.insert(kv.end(), {
                          {"lost_events", std::to_string(e.lost_events)},
                          {"lost_by_location", EncodeLostByLocation(e.lost_by_location)},
                          {"held_by_location", EncodeLostByLocation(e.held_by_location)},
                          {"overwritten_events", std::to_string(e.overwritten_events)},
                          {"unattached_lost_events", std::to_string(e.unattached_lost_events)},
                          {"ring_corruptions", std::to_string(e.ring_corruptions)},
                          {"recorder_cpu_ns", std::to_string(e.recorder_cpu_ns)},
                          {"children_cpu_ns", std::to_string(e.children_cpu_ns)},
                      });
  if (e.event_cost_ns)
    kv.emplace_back("event_cost_ns", fmt::format("{}", *e.event_cost_ns));
  AddIfSet(&kv, "sampler_passes", e.sampler_passes);
  AddIfSet(&kv, "sampler_overruns", e.sampler_overruns);
  AddIfSet(&kv, "sampler_cpu_ns", e.sampler_cpu_ns);
  AddIfSet(&kv, "switch_records", e.switch_records);
  AddIfSet(&kv, "switch_records_lost", e.switch_records_lost);
  if (e.switch_record_cost_ns)
    kv.emplace_back("switch_record_cost_ns", fmt::format("{}", *e.switch_record_cost_ns));
  AddIfSet(&kv, "calibration_cpu_ns", e.calibration_cpu_ns);
  AddIfSet(&kv, "events", e.events);
  AddIfSet(&kv, "index_offset", e.index_offset);
  if (!e.stream_totals.empty())
    kv.emplace_back("stream_totals", EncodeStreamTotals(e.stream_totals));
  return kv;
}

SessionMetadata DecodeSessionMetadata(const std::map<std::string, std::string>& kv) {
  SessionMetadata m;
  ValueReader r(kv);
  DecodeSession(r, &m.session);
  DecodeEnd(r, &m.end);
  m.session.extra = r.Unused();
  m.bad_keys = r.bad_keys();
  m.warning = r.Warning();
  return m;
}

}  // namespace parmon::format
