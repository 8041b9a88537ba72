#include "analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "analysis/units.h"

namespace parmon::analysis {
namespace {

std::string Change(double a, double b) {
  if (a == 0 && b == 0)
    return "=";
  if (a == 0)
    return "new";
  double pct = 100.0 * (b - a) / a;
  if (std::fabs(pct) < 0.5)
    return "=";
  return fmt::format("{:+.0f}%", pct);
}

std::string Signed(double seconds) {
  return fmt::format("{:+.3f} s", seconds);
}

// The locations of two runs paired by label (null where a run has none), in label order: labels
// are what a user recognises from one run to the next; ids are not stable across runs.
std::map<std::string, std::pair<const LocationResult*, const LocationResult*>> PairByLabel(
    const Results& a,
    const Results& b) {
  std::map<std::string, std::pair<const LocationResult*, const LocationResult*>> byl;
  for (const auto& l : a.locations)
    byl[l.label].first = &l;
  for (const auto& l : b.locations)
    byl[l.label].second = &l;
  return byl;
}

}  // namespace

TimeSplit SplitTime(const Results& r) {
  TimeSplit t;
  double total = 0;
  for (const auto& l : r.locations) {
    if (l.type != LocationKind::kThread)
      continue;
    const auto& s = l.states;
    double run = static_cast<double>(s[static_cast<int>(State::kRunning)]);
    double comm = static_cast<double>(s[static_cast<int>(State::kCommWait)]);
    // MPI libraries poll while they wait: their time in MPI is communication even when the
    // sampler saw the thread running.
    double mpi = static_cast<double>(l.mpi_ns);
    if (mpi > comm) {
      double moved = std::min(run, mpi - comm);
      run -= moved;
      comm += moved;
    }
    t.running += run;
    t.queued += static_cast<double>(s[static_cast<int>(State::kRunnable)]);
    t.comm += comm;
    t.lock += static_cast<double>(s[static_cast<int>(State::kLockWait)]);
    t.other += static_cast<double>(s[static_cast<int>(State::kTimerWait)] +
                                   s[static_cast<int>(State::kIoWait)] +
                                   s[static_cast<int>(State::kOther)]);
    total += static_cast<double>(Sum(s));
  }
  if (total > 0) {
    t.running /= total;
    t.queued /= total;
    t.comm /= total;
    t.lock /= total;
    t.other /= total;
  }
  return t;
}

nlohmann::json CompareJson(const Results& a, const Results& b) {
  using nlohmann::json;
  json j;
  j["schema"] = "parmon-diff/1";
  j["a"] = {{"file", a.summary.file}, {"duration_ns", a.summary.duration_ns}};
  j["b"] = {{"file", b.summary.file}, {"duration_ns", b.summary.duration_ns}};
  j["duration_change"] = a.summary.duration_ns ? (static_cast<double>(b.summary.duration_ns) -
                                                  static_cast<double>(a.summary.duration_ns)) /
                                                     static_cast<double>(a.summary.duration_ns)
                                               : 0.0;
  TimeSplit sa = SplitTime(a), sb = SplitTime(b);
  auto split = [](const TimeSplit& t) {
    return json{{"running", t.running},
                {"queued", t.queued},
                {"comm", t.comm},
                {"lock", t.lock},
                {"other", t.other}};
  };
  j["split"] = {{"a", split(sa)}, {"b", split(sb)}};
  json locs = json::array();
  for (const auto& [label, p] : PairByLabel(a, b)) {
    json x{{"label", label}};
    for (auto [side, l] : {std::pair{"a", p.first}, std::pair{"b", p.second}}) {
      if (!l) {
        x[side] = nullptr;
        continue;
      }
      json st = json::object();
      for (int i = 0; i < kStateCount; ++i)
        st[StateName(static_cast<State>(i))] = l->states[i];
      x[side] = {{"wall_ns", l->wall_ns},
                 {"cpu_ns", l->cpu_ns},
                 {"compute_ns", l->compute_ns},
                 {"mpi_ns", l->mpi_ns},
                 {"states_ns", st}};
    }
    locs.push_back(x);
  }
  j["locations"] = locs;
  json links = json::array();
  std::map<std::string, std::pair<const LinkResult*, const LinkResult*>> byk;
  for (const auto& k : a.links)
    byk[k.from_label + " -> " + k.to_label].first = &k;
  for (const auto& k : b.links)
    byk[k.from_label + " -> " + k.to_label].second = &k;
  for (const auto& [name, p] : byk) {
    json x{{"link", name}};
    for (auto [side, k] : {std::pair{"a", p.first}, std::pair{"b", p.second}})
      x[side] = k ? json{{"messages", k->messages},
                         {"bytes", k->bytes},
                         {"time_ns", k->time_ns},
                         {"wait_ns", k->wait_ns}}
                  : json(nullptr);
    links.push_back(x);
  }
  j["links"] = links;
  std::set<std::string> ida, idb;
  json gone = json::array(), added = json::array();
  for (const auto& f : a.findings)
    ida.insert(f.id + "|" + (f.subjects.empty() ? "" : f.subjects[0]));
  for (const auto& f : b.findings)
    idb.insert(f.id + "|" + (f.subjects.empty() ? "" : f.subjects[0]));
  for (const auto& f : a.findings)
    if (!idb.count(f.id + "|" + (f.subjects.empty() ? "" : f.subjects[0])))
      gone.push_back(f.text);
  for (const auto& f : b.findings)
    if (!ida.count(f.id + "|" + (f.subjects.empty() ? "" : f.subjects[0])))
      added.push_back(f.text);
  j["findings_resolved"] = gone;
  j["findings_new"] = added;
  return j;
}

std::string CompareText(const Results& a, const Results& b, bool color) {
  auto paint = [&](const std::string& s, bool good) {
    return color ? fmt::format("\033[{}m{}\033[0m", good ? "32" : "31", s) : s;
  };
  std::string o;
  double da = static_cast<double>(a.summary.duration_ns) / 1e9,
         db = static_cast<double>(b.summary.duration_ns) / 1e9;
  o += fmt::format("parmon diff\n  A  {}\n  B  {}\n\n", a.summary.file, b.summary.file);
  std::string verdict = db < da * 0.995   ? paint("better", true)
                        : db > da * 1.005 ? paint("worse", false)
                                          : "the same";
  o += fmt::format("duration   {} -> {} ({}, {}): B is {}\n", FormatDuration(a.summary.duration_ns),
                   FormatDuration(b.summary.duration_ns), Signed(db - da), Change(da, db), verdict);
  TimeSplit sa = SplitTime(a), sb = SplitTime(b);
  o += "\nthread time     A      B\n";
  auto line = [&](const char* name, double x, double y, bool lower_is_better) {
    std::string d = fmt::format("{:+.0f} pts", (y - x) * 100);
    bool good = lower_is_better ? y <= x : y >= x;
    if (std::fabs(y - x) >= 0.01)
      d = paint(d, good);
    o += fmt::format("{:<12} {:>5.0f}% {:>5.0f}%  {}\n", name, x * 100, y * 100, d);
  };
  line("running", sa.running, sb.running, false);
  line("queued", sa.queued, sb.queued, true);
  line("comm", sa.comm, sb.comm, true);
  line("lock", sa.lock, sb.lock, true);
  line("other", sa.other, sb.other, true);

  o += fmt::format("\n{:<16} {:>9} {:>9} {:>7} {:>6} {:>6}\n", "LOCATION", "WALL A", "WALL B",
                   "CHANGE", "RUN A", "RUN B");
  for (const auto& [label, p] : PairByLabel(a, b)) {
    auto wall = [](const LocationResult* l) {
      return l ? FormatDuration(l->wall_ns) : std::string("-");
    };
    auto run = [](const LocationResult* l) {
      return l ? FormatPercent(l->states[static_cast<int>(State::kRunning)], Sum(l->states))
               : std::string("-");
    };
    std::string ch = p.first && p.second ? Change(static_cast<double>(p.first->wall_ns),
                                                  static_cast<double>(p.second->wall_ns))
                                         : (p.first ? "gone" : "new");
    o += fmt::format("{:<16} {:>9} {:>9} {:>7} {:>6} {:>6}\n", label.substr(0, 16), wall(p.first),
                     wall(p.second), ch, run(p.first), run(p.second));
  }
  std::map<std::string, std::pair<const LinkResult*, const LinkResult*>> byk;
  for (const auto& k : a.links)
    byk[k.from_label + ">" + k.to_label].first = &k;
  for (const auto& k : b.links)
    byk[k.from_label + ">" + k.to_label].second = &k;
  if (!byk.empty()) {
    o += fmt::format("\n{:<24} {:>9} {:>9} {:>9} {:>9}\n", "LINK", "WAIT A", "WAIT B", "BYTES A",
                     "BYTES B");
    for (const auto& [name, p] : byk)
      o += fmt::format("{:<24} {:>9} {:>9} {:>9} {:>9}\n", name.substr(0, 24),
                       p.first ? FormatDuration(p.first->wait_ns) : "-",
                       p.second ? FormatDuration(p.second->wait_ns) : "-",
                       p.first ? FormatBytes(p.first->bytes) : "-",
                       p.second ? FormatBytes(p.second->bytes) : "-");
  }
  nlohmann::json j = CompareJson(a, b);
  o += "\nfindings\n";
  for (const auto& t : j["findings_resolved"])
    o += "  " + paint("resolved", true) + ": " + t.get<std::string>() + "\n";
  for (const auto& t : j["findings_new"])
    o += "  " + paint("new", false) + ": " + t.get<std::string>() + "\n";
  if (j["findings_resolved"].empty() && j["findings_new"].empty())
    o += "  unchanged\n";
  return o;
}

nlohmann::json ScaleJson(const std::vector<ScalePoint>& points) {
  using nlohmann::json;
  json j;
  j["schema"] = "parmon-scale/1";
  json rows = json::array();
  if (points.empty())
    return j;
  double t0 = static_cast<double>(points[0].results.summary.duration_ns);
  int n0 = points[0].n;
  for (const auto& p : points) {
    double t = static_cast<double>(p.results.summary.duration_ns);
    double speedup = t > 0 ? t0 / t * n0 : 0;
    TimeSplit s = SplitTime(p.results);
    rows.push_back({{"n", p.n},
                    {"trace", p.trace},
                    {"exit_code", p.exit_code},
                    {"duration_ns", p.results.summary.duration_ns},
                    {"speedup", speedup},
                    {"efficiency", p.n ? speedup / p.n : 0},
                    {"split",
                     {{"running", s.running},
                      {"queued", s.queued},
                      {"comm", s.comm},
                      {"lock", s.lock},
                      {"other", s.other}}}});
  }
  j["runs"] = rows;
  j["speedup_base"] = "speedup = T(first n) x first n / T(n), efficiency = speedup / n";
  return j;
}

std::string ScaleText(const std::vector<ScalePoint>& points) {
  nlohmann::json j = ScaleJson(points);
  std::string o = fmt::format("{:>5} {:>9} {:>8} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}\n", "N",
                              "TIME", "SPEEDUP", "EFFIC", "RUN", "QUEUE", "COMM", "LOCK", "OTHER");
  for (const auto& r : j["runs"]) {
    const auto& s = r["split"];
    o += fmt::format(
        "{:>5} {:>9} {:>8.2f} {:>5.0f}% {:>5.0f}% {:>5.0f}% {:>5.0f}% {:>5.0f}% {:>5.0f}%{}\n",
        r["n"].get<int>(), FormatDuration(r["duration_ns"].get<uint64_t>()),
        r["speedup"].get<double>(), r["efficiency"].get<double>() * 100,
        s["running"].get<double>() * 100, s["queued"].get<double>() * 100,
        s["comm"].get<double>() * 100, s["lock"].get<double>() * 100,
        s["other"].get<double>() * 100,
        r["exit_code"].get<int>() ? fmt::format("  (exit {})", r["exit_code"].get<int>()) : "");
  }
  o += "RUN..OTHER: where thread time went (queue = runnable, waiting for a CPU; comm includes "
       "MPI).\n";
  // Where the lost efficiency went between the first and the last run.
  if (points.size() >= 2) {
    TimeSplit a = SplitTime(points.front().results), b = SplitTime(points.back().results);
    std::vector<std::pair<double, std::string>> grew = {{b.queued - a.queued, "queueing for CPUs"},
                                                        {b.comm - a.comm, "communication"},
                                                        {b.lock - a.lock, "lock waits"},
                                                        {b.other - a.other, "other waits"}};
    std::sort(grew.rbegin(), grew.rend());
    if (grew[0].first > 0.01)
      o += fmt::format(
          "From n={} to n={} the running share fell {:.0f} points; most of it went to {} (+{:.0f} "
          "points).\n",
          points.front().n, points.back().n, (a.running - b.running) * 100, grew[0].second,
          grew[0].first * 100);
  }
  return o;
}

}  // namespace parmon::analysis
