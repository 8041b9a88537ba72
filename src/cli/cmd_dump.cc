// parmon dump: every event in time order, one per line. See docs/man/parmon-dump.md.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include "cli/cli_errors.h"
#include "cli/commands.h"
#include "format/matrix.h"
#include "live_view/follow.h"
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
    case Kind::kMatrixData: {
      auto part = format::DecodeMatrixPart(e);
      if (!part.ok())  // printed with its raw args below, and why it cannot be read
        return fmt::format("{} (unreadable: {})", name, part.status().message());
      return fmt::format("{} {}", name, format::DescribeMatrixPart(*part, defs.Name(part->matrix)));
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
    // A function (`MPI_Send`, `read`) or call site is a string id: print what it names.
    if ((an == "func" || an == "site") && e.args[i] && e.args[i] <= UINT32_MAX &&
        defs.strings.count(static_cast<uint32_t>(e.args[i]))) {
      s += fmt::format(" {}={}", an, defs.Name(static_cast<uint32_t>(e.args[i])));
      continue;
    }
    s += fmt::format(" {}={}", an.empty() ? fmt::format("a{}", i) : an, e.args[i]);
  }
  if (!e.payload.empty())
    s += fmt::format(" \"{}\"", Printable(e.payload, 80));
  return s;
}

// One output line: time (seconds from the session start, or session-clock ns), where, what.
void AppendLine(const model::Session& session,
                const format::Event& e,
                uint64_t start,
                bool absolute,
                std::string* out) {
  const format::LocationDef* l = session.Location(e.location);
  std::string where =
      l ? fmt::format("{}/{} {}", l->pid, l->tid, l->name) : fmt::format("loc{}", e.location);
  std::string t =
      absolute
          ? std::to_string(e.ts)
          : fmt::format("{:.9f}", (static_cast<double>(e.ts) - static_cast<double>(start)) / 1e9);
  *out += fmt::format("{:>14} [{}] {}\n", t, where, Describe(session.reader(), e));
}

// The --tid/--pid/--location selection, as a set of location ids of the definitions read so far.
struct Selection {
  std::vector<uint32_t> tids, pids, locations;
  bool all() const { return tids.empty() && pids.empty() && locations.empty(); }
  std::set<uint32_t> Ids(const format::Definitions& defs) const {
    std::set<uint32_t> sel(locations.begin(), locations.end());
    for (const auto& [id, l] : defs.locations) {
      // A CPU location's number is in its tid field: --tid 1 is thread 1, not cpu1.
      if (l.type != format::LocationType::kThread)
        continue;
      if (std::find(tids.begin(), tids.end(), l.tid) != tids.end())
        sel.insert(id);
      if (std::find(pids.begin(), pids.end(), l.pid) != pids.end())
        sel.insert(id);
    }
    return sel;
  }
};

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

// --follow: prints the events as every stream becomes complete up to them (the recorder's
// watermarks), in the order and with the times the dump of the finished file has, until the
// recorder closes the session or Ctrl-C. Threads that start later are selected by tid/pid as
// their definitions arrive, so the location filter is applied per event here.
int FollowDump(const std::string& path,
               const Selection& selection,
               const std::string& from,
               const std::string& to,
               bool absolute) {
  auto opened = live_view::LiveTrace::Follow(path);
  if (!opened.ok()) {
    fmt::print(stderr, "parmon dump: {}\n", opened.status().message());
    return 1;
  }
  live_view::LiveTrace& live = **opened;
  // The start the times count from, as the finished file will have it: the recorder's start
  // (SESSION chunk) or the first event, if earlier; known once an event is complete (every
  // event before the watermark has been read, so no earlier one can come).
  auto start_known = [&] {
    const uint64_t first = live.reader().first_ts();  // 0: no event yet
    return live.ended() || (first != 0 && live.complete() && first <= *live.complete());
  };
  while (!start_known() && !live_view::StopRequested()) {
    live_view::SleepUnlessStopped(50'000'000);
    if (Status s = live.Refresh(); !s.ok()) {
      fmt::print(stderr, "parmon dump: {}\n", s.message());
      return 1;
    }
  }
  auto now = model::Session::Over(live.reader());
  if (!now.ok()) {
    fmt::print(stderr, "parmon dump: {}\n", now.status().message());
    return 1;
  }
  const uint64_t start = (*now)->start();
  model::MergeFilter filter;
  uint64_t ns;
  if (!from.empty() && recorder::ParseDuration(from, &ns))
    filter.from_ts = start + ns;
  if (!to.empty() && recorder::ParseDuration(to, &ns))
    filter.to_ts = start + ns;
  std::unique_ptr<model::Merge> merge;
  uint64_t generation = 0, printed = 0;
  std::set<uint32_t> selected;
  size_t locations_seen = SIZE_MAX;
  format::Event e;
  std::string out;
  // `parmon ctl` records, printed between the events as in the dump of the finished file (the
  // definitions only grow, so the index of the next one stays valid across refreshes).
  size_t next_mark = 0;
  auto marks_until = [&](uint64_t ts) {
    const auto& marks = live.reader().definitions().control;
    for (; next_mark < marks.size() && marks[next_mark].ts <= ts; ++next_mark)
      if (marks[next_mark].ts >= filter.from_ts && marks[next_mark].ts <= filter.to_ts)
        out += DescribeMark(live.reader(), marks[next_mark], start, absolute);
  };
  for (;;) {
    // Once nothing more can come, every event read is printed (a trace its writer abandoned
    // is printed to its last whole chunk, as `parmon dump` prints it).
    const bool ended = live.ended();
    std::optional<uint64_t> until = ended ? UINT64_MAX : live.complete();
    bool rebuilt = false;
    if (!merge || generation != live.generation()) {
      // A session directory read again: a new merge, past the events already printed.
      merge = std::make_unique<model::Merge>(live.session(), filter);
      generation = live.generation();
      locations_seen = SIZE_MAX;
      rebuilt = true;
    }
    if (live.session().definitions().locations.size() != locations_seen) {
      locations_seen = live.session().definitions().locations.size();
      selected = selection.Ids(live.session().definitions());
    }
    for (uint64_t skip = 0; rebuilt && skip < printed && merge->Next(&e, until.value_or(0));)
      skip += selection.all() || selected.count(e.location);
    while (until && merge->Next(&e, *until)) {
      marks_until(e.ts);
      if (!selection.all() && !selected.count(e.location))
        continue;
      AppendLine(live.session(), e, start, absolute, &out);
      ++printed;
      if (out.size() > (1 << 16)) {
        fwrite(out.data(), 1, out.size(), stdout);
        out.clear();
      }
    }
    if (ended)
      marks_until(UINT64_MAX);
    fwrite(out.data(), 1, out.size(), stdout);
    out.clear();
    fflush(stdout);
    if (ended || live_view::StopRequested())
      break;
    live_view::SleepUnlessStopped(100'000'000);
    if (Status s = live.Refresh(); !s.ok()) {
      fmt::print(stderr, "parmon dump: {}\n", s.message());
      return 1;
    }
  }
  const format::TraceReader& r = live.reader();
  if (live.abandoned())
    fmt::print(stderr, "parmon dump: {}: every event it wrote is printed\n", live.WhyAbandoned());
  for (const auto& p : r.problems())
    fmt::print(stderr, "parmon dump: {}\n", p.message);
  for (const auto& w : r.warnings())
    fmt::print(stderr, "parmon dump: {}\n", w);
  if (!live.ended())
    return 130;  // interrupted before the session ended
  return r.problems().empty() && !live.abandoned() ? 0 : 3;
}

}  // namespace

int RunDump(int argc, char** argv) {
  CLI::App app{"Print every event of a trace, merged in time order across threads.", "parmon dump"};
  std::string path, from, to;
  Selection selection;
  bool absolute = false, follow = false;
  app.add_option("file", path, "trace file, session directory, or - (standard input)")->required();
  app.add_option("--tid", selection.tids, "only these threads (repeatable)");
  app.add_option("--pid", selection.pids, "only these processes (repeatable)");
  app.add_option("--location", selection.locations, "only these locations (repeatable)");
  app.add_option("--from", from,
                 "start of the time range, from the session start (e.g. 1.5s, 200ms)");
  app.add_option("--to", to, "end of the time range, from the session start");
  app.add_flag("--absolute", absolute,
               "print session-clock nanoseconds instead of seconds from the start");
  app.add_flag("-f,--follow", follow,
               "the trace is still being written: print events as they become complete, until "
               "the recording ends (or Ctrl-C)");
  if (int rc = ParseCommandLine(app, argc, argv, "dump"); rc >= 0)
    return rc;
  uint64_t ns;
  for (const auto& [name, value] : {std::pair{"--from", &from}, std::pair{"--to", &to}}) {
    if (!value->empty() && !recorder::ParseDuration(*value, &ns)) {
      fmt::print(stderr, "parmon dump: {} '{}' is not a duration\n", name, *value);
      return 2;
    }
  }
  if (follow)
    return FollowDump(path, selection, from, to, absolute);
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
  if (!selection.all())
    filter.locations = selection.Ids(r.definitions());
  if (!from.empty() && recorder::ParseDuration(from, &ns))
    filter.from_ts = start + ns;
  if (!to.empty() && recorder::ParseDuration(to, &ns))
    filter.to_ts = start + ns;
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
    AppendLine(session, e, start, absolute, &out);
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
