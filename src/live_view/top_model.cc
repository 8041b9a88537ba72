// TopModel (top_model.h): the last interval as the difference of two snapshots.
#include "live_view/top_model.h"

#include <algorithm>

namespace parmon::live_view {
namespace {

using analysis::State;

// A later snapshot can finish an open call differently from an earlier one (a receive still
// waiting counts as waiting so far), so a difference can be slightly negative: it is clamped.
uint64_t Minus(uint64_t now, uint64_t before) {
  return now > before ? now - before : 0;
}

double PerSecond(uint64_t amount, uint64_t ns) {
  return ns ? static_cast<double>(amount) * 1e9 / static_cast<double>(ns) : 0;
}

// part of whole, 0..1.
double Share(uint64_t part, uint64_t whole) {
  return whole ? std::min(1.0, static_cast<double>(part) / static_cast<double>(whole)) : 0;
}

}  // namespace

double ThreadRow::WaitShare() const {
  if (!last_ns)
    return 0;
  const uint64_t busy =
      last[static_cast<int>(State::kRunning)] + last[static_cast<int>(State::kRunnable)];
  return static_cast<double>(Minus(last_ns, busy)) / static_cast<double>(last_ns);
}

analysis::Results ResultsFromReportJson(const nlohmann::json& j) {
  using nlohmann::json;
  auto u64 = [](const json& o, const char* k) -> uint64_t {
    return o.is_object() && o.contains(k) && o[k].is_number() ? o[k].get<uint64_t>() : 0;
  };
  auto i64 = [](const json& o, const char* k, int64_t def) -> int64_t {
    return o.is_object() && o.contains(k) && o[k].is_number() ? o[k].get<int64_t>() : def;
  };
  auto str = [](const json& o, const char* k) -> std::string {
    return o.is_object() && o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : "";
  };
  analysis::Results r;
  if (!j.is_object())
    return r;
  const json& s = j.value("summary", json::object());
  r.summary.file = str(s, "file");
  r.summary.command = str(s, "command");
  r.summary.session_start = 0;
  r.summary.window_start = u64(s, "window_start_ns");
  r.summary.window_end = u64(s, "window_end_ns");
  r.summary.duration_ns = u64(s, "duration_ns");
  r.summary.events = u64(s, "events");
  r.summary.lost_events = u64(s, "lost_events");
  r.summary.unattached_lost_events = u64(s, "unattached_lost_events");
  r.summary.overwritten_events = u64(s, "overwritten_events");
  r.summary.damaged_events = u64(s, "damaged_events");
  r.summary.pauses = static_cast<uint32_t>(u64(s, "pauses"));
  r.summary.paused_ns = u64(s, "paused_ns");
  r.summary.has_sched = s.is_object() && s.value("has_sched", false);
  for (const json& l : j.value("locations", json::array())) {
    analysis::LocationResult x;
    x.id = static_cast<uint32_t>(u64(l, "id"));
    x.kind = str(l, "kind");
    x.type = x.kind == "cpu" ? analysis::LocationKind::kCpu : analysis::LocationKind::kThread;
    x.pid = static_cast<uint32_t>(u64(l, "pid"));
    x.tid = static_cast<uint32_t>(u64(l, "tid"));
    x.rank = static_cast<int32_t>(i64(l, "rank", -1));
    x.label = str(l, "label");
    x.name = str(l, "name");
    x.events = u64(l, "events");
    x.lost_events = u64(l, "lost_events");
    const json& st = l.value("states_ns", json::object());
    for (int i = 0; i < analysis::kStateCount; ++i)
      x.states[i] = u64(st, analysis::StateName(static_cast<State>(i)));
    r.locations.push_back(std::move(x));
  }
  for (const json& k : j.value("links", json::array())) {
    analysis::LinkResult x;
    x.kind = str(k, "kind");
    x.type = x.kind == "channel" ? analysis::LinkKind::kChannel : analysis::LinkKind::kMpi;
    x.from = i64(k, "from", -1);
    x.to = i64(k, "to", -1);
    x.from_label = str(k, "from_label");
    x.to_label = str(k, "to_label");
    x.messages = u64(k, "messages");
    x.bytes = u64(k, "bytes");
    x.sender_wait_ns = u64(k, "sender_wait_ns");
    x.receiver_wait_ns = u64(k, "receiver_wait_ns");
    r.links.push_back(std::move(x));
  }
  for (const json& f : j.value("diagnosis", json::array())) {
    analysis::Finding x;
    x.id = str(f, "id");
    x.text = str(f, "text");
    x.percent_of_run = f.is_object() && f.contains("percent") && f["percent"].is_number()
                           ? f["percent"].get<double>()
                           : 0;
    if (f.is_object() && f.contains("subjects") && f["subjects"].is_array())
      for (const json& sub : f["subjects"])
        if (sub.is_string())
          x.subjects.push_back(sub.get<std::string>());
    r.findings.push_back(std::move(x));
  }
  return r;
}

void TopModel::Update(const analysis::Results& r,
                      bool finished,
                      std::vector<std::string> problems) {
  Frame f;
  const analysis::Summary& s = r.summary;
  f.file = s.file;
  f.command = s.command;
  f.finished = finished;
  f.covered_ns = s.window_end > s.session_start ? s.window_end - s.session_start : 0;
  f.interval_ns = Minus(s.window_end, std::max(last_end_, s.window_start));
  f.events = s.events;
  f.lost = s.lost_events + s.unattached_lost_events + s.overwritten_events + s.damaged_events;
  f.paused = s.pauses;  // ranges `parmon ctl pause` cut out of the recording so far
  f.paused_ns = s.paused_ns;
  f.has_sched = s.has_sched;
  f.problems = std::move(problems);
  std::map<uint32_t, analysis::StateTimes> states;
  for (const auto& l : r.locations) {
    const analysis::StateTimes& before = prev_states_[l.id];
    analysis::StateTimes last{};
    for (int i = 0; i < analysis::kStateCount; ++i)
      last[i] = Minus(l.states[i], before[i]);
    states[l.id] = l.states;
    if (l.type == analysis::LocationKind::kCpu) {
      const uint64_t span = analysis::Sum(last);
      f.cpus.push_back({l.id, l.label,
                        span ? static_cast<double>(last[static_cast<int>(State::kRunning)]) /
                                   static_cast<double>(span)
                             : 0});
      continue;
    }
    ThreadRow t;
    t.id = l.id;
    t.pid = l.pid;
    t.tid = l.tid;
    t.rank = l.rank;
    t.label = l.label;
    t.name = l.name;
    t.last = last;
    t.last_ns = analysis::Sum(last);
    t.total = l.states;
    t.events = l.events;
    t.lost = l.lost_events;
    f.threads.push_back(std::move(t));
  }
  std::map<LinkKey, LinkTotals> links;
  for (const auto& k : r.links) {
    const LinkKey key{static_cast<int>(k.type), k.from, k.to};
    const LinkTotals now{k.bytes, k.messages, k.sender_wait_ns, k.receiver_wait_ns};
    const LinkTotals& before = prev_links_[key];
    LinkRow row;
    row.kind = k.kind;
    row.from = k.from_label;
    row.to = k.to_label;
    row.bytes = k.bytes;
    row.bytes_per_s = PerSecond(Minus(now.bytes, before.bytes), f.interval_ns);
    row.messages_per_s = PerSecond(Minus(now.messages, before.messages), f.interval_ns);
    row.sender_wait = Share(Minus(now.sender_wait_ns, before.sender_wait_ns), f.interval_ns);
    row.receiver_wait = Share(Minus(now.receiver_wait_ns, before.receiver_wait_ns), f.interval_ns);
    links[key] = now;
    f.links.push_back(std::move(row));
  }
  std::stable_sort(f.links.begin(), f.links.end(), [](const LinkRow& a, const LinkRow& b) {
    if (a.bytes_per_s != b.bytes_per_s)
      return a.bytes_per_s > b.bytes_per_s;
    return std::max(a.sender_wait, a.receiver_wait) > std::max(b.sender_wait, b.receiver_wait);
  });
  for (const auto& x : r.findings) {
    std::string key = x.id;
    for (const auto& subject : x.subjects)
      key += "\x1f" + subject;
    auto [it, added] = first_seen_.emplace(key, f.covered_ns);
    f.findings.push_back({x.id, x.text, x.percent_of_run, it->second});
  }
  prev_states_ = std::move(states);
  prev_links_ = std::move(links);
  last_end_ = s.window_end;
  frame_ = std::move(f);
  ++updates_;
}

}  // namespace parmon::live_view
