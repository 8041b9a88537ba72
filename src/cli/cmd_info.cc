// parmon info: what a trace holds. See docs/man/parmon-info.md.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>
#include <map>

#include "analysis/json_dump.h"
#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "format/reader.h"
#include "model/merge.h"
#include "model/session.h"
#include "sched/summary.h"

namespace parmon::cli {
namespace {

using format::Kind;

struct LocationStats {
  uint64_t events = 0;
  std::map<std::string, uint64_t> by_source;  // runtime, sched, sampler, recorder
  uint64_t lost = 0;
  uint64_t first = UINT64_MAX;
  uint64_t last = 0;
};

std::string FormatTime(uint64_t realtime_ns) {
  time_t t = static_cast<time_t>(realtime_ns / 1000000000ull);
  tm tm;
  gmtime_r(&t, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// Everything info prints, text or JSON.
struct InfoFigures {
  std::map<uint32_t, LocationStats> stats;
  uint64_t lost_total = 0;
  uint64_t damaged_total = 0;
  bool damaged_unknown = false;
  uint64_t unattached = 0;
  uint64_t overwritten = 0;
  uint64_t events = 0;
  double duration = 0;  // seconds
  size_t threads = 0;
  double bytes_per_event = 0;
};

std::map<uint32_t, LocationStats> CollectLocationStats(const model::Session& session) {
  const format::TraceReader& r = session.reader();
  const format::EndInfo& totals = session.totals();
  std::map<uint32_t, LocationStats> stats;
  for (model::StreamIndex i = 0; i < r.streams().size(); ++i) {
    const format::Stream& s = r.streams()[i];
    auto& st = stats[s.location];
    st.events += s.events;
    static const char* kSourceNames[] = {"definitions", "runtime", "sched", "sampler", "recorder"};
    auto src = static_cast<size_t>(s.source);
    st.by_source[src < 5 ? kSourceNames[src] : "other"] += s.events;
    // On rank 0's clock for a per-rank session, as dump prints them.
    st.first = std::min(st.first, session.first_ts(i));
    st.last = std::max(st.last, session.last_ts(i));
  }
  // Lost events: the END chunk's totals when the file was closed, else count the Lost events.
  if (r.closed_cleanly()) {
    for (const auto& [loc, n] : totals.lost_by_location)
      stats[loc].lost += n;
  } else {
    model::MergeFilter f;
    f.sources = std::set<format::Source>{format::Source::kRuntime, format::Source::kRecorder};
    model::Merge merge(session, f);
    merge.Run([&](const format::Event& e, model::StreamIndex) {
      if (e.kind_enum() == Kind::kLost || e.kind_enum() == Kind::kRingLost)
        stats[e.location].lost += e.args[0];
    });
  }
  return stats;
}

// The names the program registered with parmon_matrix_register (their steps are MatrixData
// events, counted with the others; `parmon view` shows them).
std::vector<std::string> MatrixNames(const format::Definitions& defs) {
  std::vector<std::string> names;
  for (const auto& [id, d] : defs.strings)
    if (d.category == format::StringCategory::kMatrix)
      names.push_back(defs.Name(id));
  return names;
}

InfoFigures Gather(const model::Session& session) {
  const format::TraceReader& r = session.reader();
  const format::SessionInfo& info = session.info();
  const format::EndInfo& totals = session.totals();
  InfoFigures f;
  f.stats = CollectLocationStats(session);
  for (const auto& [loc, st] : f.stats)
    f.lost_total += st.lost;
  for (const auto& p : r.problems()) {
    if (p.events_lost > 0)
      f.damaged_total += static_cast<uint64_t>(p.events_lost);
    if (p.events_lost < 0)
      f.damaged_unknown = true;
  }
  f.unattached = totals.unattached_lost_events;
  f.overwritten = totals.overwritten_events;
  f.events = r.total_events();
  uint64_t start_ts = info.start_ts;
  uint64_t end_ts = r.session().count("end_ts") ? totals.end_ts : r.last_ts();
  if (start_ts == 0)
    start_ts = r.first_ts();
  f.duration = end_ts > start_ts ? static_cast<double>(end_ts - start_ts) / 1e9 : 0;
  for (const auto& [id, l] : r.definitions().locations)
    f.threads += l.type == format::LocationType::kThread;
  f.bytes_per_event =
      f.events ? static_cast<double>(r.file_size()) / static_cast<double>(f.events) : 0;
  return f;
}

void PrintJson(const std::string& path, const model::Session& session, const InfoFigures& f) {
  const format::TraceReader& r = session.reader();
  const format::SessionInfo& info = session.info();
  const auto& defs = r.definitions();
  nlohmann::json j;
  j["file"] = path;
  j["file_bytes"] = r.file_size();
  j["format_version"] = fmt::format("{}.{}", r.version_major(), r.version_minor());
  j["closed_cleanly"] = r.closed_cleanly();
  j["session"] = r.session();
  j["duration_s"] = f.duration;
  j["processes"] = defs.processes.size();
  j["threads"] = f.threads;
  j["events"] = f.events;
  j["matrices"] = MatrixNames(defs);
  j["lost_events"] = f.lost_total + f.unattached;
  j["overwritten_events"] = f.overwritten;
  j["damaged_events"] = f.damaged_total;
  j["damaged_events_unknown"] = f.damaged_unknown;
  j["bytes_per_event"] = f.bytes_per_event;
  j["clock"] = info.clock;
  nlohmann::json locs = nlohmann::json::array();
  for (const auto& [id, st] : f.stats) {
    nlohmann::json l;
    l["location"] = id;
    auto it = defs.locations.find(id);
    if (it != defs.locations.end()) {
      l["type"] = it->second.type == format::LocationType::kCpu ? "cpu" : "thread";
      l["pid"] = it->second.pid;
      l["tid"] = it->second.tid;
      l["name"] = it->second.name;
      if (!it->second.first_name.empty())
        l["first_name"] = it->second.first_name;
    }
    l["events"] = st.events;
    l["events_by_source"] = st.by_source;
    l["lost"] = st.lost;
    l["first_ts"] = st.first == UINT64_MAX ? 0 : st.first;
    l["last_ts"] = st.last;
    locs.push_back(l);
  }
  j["locations"] = locs;
  nlohmann::json procs = nlohmann::json::array();
  for (const auto& [pid, p] : defs.processes)
    procs.push_back({{"pid", pid}, {"ppid", p.ppid}, {"command", p.command}});
  j["process_list"] = procs;
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& p : r.problems()) {
    nlohmann::json pj{{"offset", p.offset}, {"message", p.message}, {"events_lost", p.events_lost}};
    if (p.location)
      pj["location"] = *p.location;
    problems.push_back(pj);
  }
  j["problems"] = problems;
  j["warnings"] = r.warnings();
  j["sched"] = sched::SummaryJson(session, sched::Summarize(session));
  fmt::print("{}\n", analysis::DumpJson(j, 2));
}

void PrintText(const std::string& path, const model::Session& session, const InfoFigures& f) {
  const format::TraceReader& r = session.reader();
  const format::SessionInfo& info = session.info();
  const format::EndInfo& totals = session.totals();
  const auto& defs = r.definitions();
  fmt::print("trace       {} ({} bytes, format {}.{}{})\n", path, r.file_size(), r.version_major(),
             r.version_minor(), r.closed_cleanly() ? "" : ", NOT closed cleanly");
  auto or_unknown = [&](const char* key, const std::string& v) {
    return r.session().count(key) ? v : std::string("?");
  };
  fmt::print("command     {}\n", or_unknown("command", info.command));
  fmt::print("host        {}\n", or_unknown("host", info.host));
  if (info.start_realtime_ns)
    fmt::print("started     {}\n", FormatTime(info.start_realtime_ns));
  fmt::print("duration    {:.6f} s\n", f.duration);
  fmt::print("clock       {}\n", or_unknown("clock", info.clock));
  if (totals.exit_code)
    fmt::print("exit code   {}\n", *totals.exit_code);
  fmt::print("processes   {}\n", defs.processes.size());
  fmt::print("threads     {}\n", f.threads);
  fmt::print("events      {} ({:.2f} bytes per event on disk)\n", f.events, f.bytes_per_event);
  if (const auto names = MatrixNames(defs); !names.empty())
    fmt::print("matrices    {} ({})\n", names.size(), fmt::join(names, ", "));
  fmt::print(
      "lost        {}{}{}\n", f.lost_total + f.unattached,
      f.unattached ? fmt::format(" ({} from threads that found no free ring)", f.unattached) : "",
      f.overwritten ? fmt::format("; {} overwritten by the flight recorder", f.overwritten) : "");
  if (!r.problems().empty()) {
    fmt::print("\ndamage:\n");
    for (const auto& p : r.problems())
      fmt::print("  - {}\n", p.message);
  }
  if (!r.warnings().empty()) {
    fmt::print("\nwarnings:\n");
    for (const auto& w : r.warnings())
      fmt::print("  - {}\n", w);
  }
  // A renamed thread shows both names, "forkexec -> true"; the column fits them (to a limit).
  auto shown_name = [&](uint32_t id) {
    auto it = defs.locations.find(id);
    if (it == defs.locations.end())
      return std::string();
    const format::LocationDef& l = it->second;
    return l.first_name.empty() ? l.name : l.first_name + " -> " + l.name;
  };
  size_t width = 16;
  for (const auto& [id, st] : f.stats)
    width = std::max(width, std::min<size_t>(shown_name(id).size(), 36));
  fmt::print("\n{:>5} {:>8} {:>8} {:<{}} {:>12} {:>10} {:>12}\n", "LOC", "PID", "TID", "NAME",
             width, "EVENTS", "LOST", "SPAN(s)");
  for (const auto& [id, st] : f.stats) {
    auto it = defs.locations.find(id);
    uint32_t pid = 0, tid = 0;
    if (it != defs.locations.end()) {
      pid = it->second.pid;
      tid = it->second.tid;
    }
    double span = st.last > st.first ? static_cast<double>(st.last - st.first) / 1e9 : 0;
    fmt::print("{:>5} {:>8} {:>8} {:<{}} {:>12} {:>10} {:>12.6f}\n", id, pid, tid,
               shown_name(id).substr(0, width), width, st.events, st.lost, span);
  }
  sched::PrintSummary(session, sched::Summarize(session));
}

}  // namespace

int RunInfo(int argc, char** argv) {
  CLI::App app{"Summarise a trace: session, processes, threads, events and losses.", "parmon info"};
  std::string path;
  bool json = false;
  app.add_option("file", path, "trace file, session directory, or - (standard input)")->required();
  app.add_flag("--json", json, "machine-readable output");
  if (int rc = ParseCommandLine(app, argc, argv, "info"); rc >= 0)
    return rc;
  format::OpenOptions oo;
  oo.verify_payloads = true;
  model::SessionOptions so;
  so.open = oo;
  auto opened = model::Session::Open(path, so);
  if (!opened.ok()) {
    fmt::print(stderr, "parmon info: {}\n", opened.status().message());
    return 1;
  }
  const model::Session& session = **opened;
  InfoFigures figures = Gather(session);
  if (json)
    PrintJson(path, session, figures);
  else
    PrintText(path, session, figures);
  return 0;
}

}  // namespace parmon::cli
