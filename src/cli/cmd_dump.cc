// parmon dump: every event in time order, one per line. See docs/man/parmon-dump.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstring>

#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "model/merge.h"
#include "model/session.h"
#include "recorder/recorder.h"

namespace parmon::cli {
namespace {

using format::Kind;

std::string Printable(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, max))
    out += (c >= 32 && c < 127) ? c : '.';
  if (s.size() > max)
    out += "...";
  return out;
}

std::string Describe(const format::TraceReader& r, const format::Event& e) {
  const auto& defs = r.definitions();
  const auto& schema = r.schema();
  std::string name = schema.Known(e.kind) ? schema.name(e.kind) : fmt::format("kind{}", e.kind);
  switch (e.kind_enum()) {
    case Kind::kRegionEnter:
    case Kind::kRegionLeave:
      return fmt::format("{} {}", name, defs.Name(static_cast<uint32_t>(e.args[0])));
    case Kind::kMarker:
      return fmt::format("{} {}", name, defs.Name(static_cast<uint32_t>(e.args[0])));
    case Kind::kCounterInt:
      return fmt::format("{} {}={}", name, defs.Name(static_cast<uint32_t>(e.args[0])),
                         static_cast<int64_t>(e.args[1]));
    case Kind::kCounterDouble: {
      double v;
      std::memcpy(&v, &e.args[1], sizeof v);
      return fmt::format("{} {}={}", name, defs.Name(static_cast<uint32_t>(e.args[0])), v);
    }
    case Kind::kTraceEvent:
    case Kind::kTraceData: {
      auto it = defs.event_names.find(static_cast<uint32_t>(e.args[0]));
      std::string ev = it == defs.event_names.end() ? std::to_string(e.args[0]) : it->second;
      if (e.kind_enum() == Kind::kTraceEvent)
        return fmt::format("{} {}", name, ev);
      return fmt::format("{} {} {} bytes", name, ev, e.payload.size());
    }
    default:
      break;
  }
  std::string s = name;
  std::string arg_names = schema.Known(e.kind) ? schema.arg_names(e.kind) : "";
  size_t pos = 0;
  for (int i = 0; i < e.nargs; ++i) {
    size_t comma = arg_names.find(',', pos);
    std::string an =
        arg_names.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? arg_names.size() : comma + 1;
    s += fmt::format(" {}={}", an.empty() ? fmt::format("a{}", i) : an, e.args[i]);
  }
  if (!e.payload.empty())
    s += fmt::format(" \"{}\"", Printable(e.payload, 80));
  return s;
}

std::string DescribeMark(const format::TraceReader& r,
                         const format::Definitions::ControlMark& m,
                         uint64_t start,
                         bool absolute) {
  format::Event e;
  e.ts = m.ts;
  e.kind = m.kind;
  e.nargs = format::GetKindInfo(m.kind).nargs;
  e.args[0] = m.arg;
  e.payload = m.payload;
  std::string t =
      absolute
          ? std::to_string(m.ts)
          : fmt::format("{:.9f}", (static_cast<double>(m.ts) - static_cast<double>(start)) / 1e9);
  return fmt::format("{:>14} [session] {}\n", t, Describe(r, e));
}

}  // namespace

int RunDump(int argc, char** argv) {
  CLI::App app{"Print every event of a trace, merged in time order across threads.", "parmon dump"};
  std::string path, from, to;
  std::vector<uint32_t> tids, pids, locations;
  bool absolute = false;
  app.add_option("file", path, "trace file, session directory, or - (standard input)")->required();
  app.add_option("--tid", tids, "only these threads (repeatable)");
  app.add_option("--pid", pids, "only these processes (repeatable)");
  app.add_option("--location", locations, "only these locations (repeatable)");
  app.add_option("--from", from,
                 "start of the time range, from the session start (e.g. 1.5s, 200ms)");
  app.add_option("--to", to, "end of the time range, from the session start");
  app.add_flag("--absolute", absolute,
               "print session-clock nanoseconds instead of seconds from the start");
  if (int rc = ParseCommandLine(app, argc, argv, "dump"); rc >= 0)
    return rc;
  auto opened = model::Session::Open(path);
  if (!opened.ok()) {
    fmt::print(stderr, "parmon dump: {}\n", opened.status().message());
    return 1;
  }
  const model::Session& session = **opened;
  const format::TraceReader& r = session.reader();
  // Times count from the session's start; a per-rank session's are on rank 0's clock, as in
  // `parmon report`.
  const uint64_t start = session.start();
  model::MergeFilter filter;
  if (!tids.empty() || !pids.empty() || !locations.empty()) {
    std::set<uint32_t> sel(locations.begin(), locations.end());
    for (const auto& [id, l] : r.definitions().locations) {
      if (std::find(tids.begin(), tids.end(), l.tid) != tids.end())
        sel.insert(id);
      if (std::find(pids.begin(), pids.end(), l.pid) != pids.end())
        sel.insert(id);
    }
    filter.locations = sel;
  }
  uint64_t ns;
  if (!from.empty()) {
    if (!recorder::ParseDuration(from, &ns)) {
      fmt::print(stderr, "parmon dump: --from '{}' is not a duration\n", from);
      return 2;
    }
    filter.from_ts = start + ns;
  }
  if (!to.empty()) {
    if (!recorder::ParseDuration(to, &ns)) {
      fmt::print(stderr, "parmon dump: --to '{}' is not a duration\n", to);
      return 2;
    }
    filter.to_ts = start + ns;
  }
  model::Merge merge(session, filter);
  format::Event e;
  std::string out;
  // `parmon ctl` records (session-wide, with the definitions) go between the events, in time.
  const auto& marks = r.definitions().control;
  size_t next_mark = 0;
  auto marks_until = [&](uint64_t ts) {
    for (; next_mark < marks.size() && marks[next_mark].ts <= ts; ++next_mark)
      if (marks[next_mark].ts >= filter.from_ts && marks[next_mark].ts <= filter.to_ts)
        out += DescribeMark(r, marks[next_mark], start, absolute);
  };
  while (merge.Next(&e)) {
    marks_until(e.ts);
    const format::LocationDef* l = session.Location(e.location);
    std::string where =
        l ? fmt::format("{}/{} {}", l->pid, l->tid, l->name) : fmt::format("loc{}", e.location);
    std::string t =
        absolute
            ? std::to_string(e.ts)
            : fmt::format("{:.9f}", (static_cast<double>(e.ts) - static_cast<double>(start)) / 1e9);
    out += fmt::format("{:>14} [{}] {}\n", t, where, Describe(r, e));
    if (out.size() > (1 << 16)) {
      fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  marks_until(UINT64_MAX);
  fwrite(out.data(), 1, out.size(), stdout);
  for (const auto& p : r.problems())
    fmt::print(stderr, "parmon dump: {}\n", p.message);
  // Bad metadata is not damage: every event was printed.
  for (const auto& w : r.warnings())
    fmt::print(stderr, "parmon dump: {}\n", w);
  return r.problems().empty() ? 0 : 3;
}

}  // namespace parmon::cli
