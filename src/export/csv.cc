// ExportCsv: one row per event of the window, in the merged (time) order, times in ns from the
// session start on rank 0's clock. Columns:
//   time_ns,location,pid,tid,rank,thread,kind,name,args,payload
// name is the string an event refers to (region, MPI or interposed function, counter, marker),
// args the kind's arguments as "name=value" separated by spaces (docs/events.md), payload the
// text an event carries (thread names, channel descriptions), or "<N bytes>" for binary data.
// Streaming: one row at a time through a 1 MiB buffer.
#include <fmt/format.h>

#include "export/export.h"
#include "export/export_common.h"

namespace parmon::exporter {
namespace {

using format::Kind;

// Which argument of a kind is a string id worth naming, or -1.
int NamedArg(Kind k) {
  switch (k) {
    case Kind::kRegionEnter:
    case Kind::kRegionLeave:
    case Kind::kMarker:
    case Kind::kCounterInt:
    case Kind::kCounterDouble:
    case Kind::kMpiEnter:
    case Kind::kMpiLeave:
    case Kind::kMpiCollective:
    case Kind::kMpiRma:
    case Kind::kMpiIo:
    case Kind::kMpiError:
    case Kind::kMpiStats:
    case Kind::kChanWait:
    case Kind::kTimerWait:
      return 0;
    case Kind::kChanRead:
    case Kind::kChanWrite:
      return 3;
    default:
      return -1;
  }
}

bool Printable(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20)
      return false;
  return true;
}

void AppendArgs(std::string* out, const format::KindSchema& schema, const format::Event& e) {
  std::string names = schema.Known(e.kind) ? schema.arg_names(e.kind) : "";
  std::string text;
  size_t pos = 0;
  for (int i = 0; i < e.nargs; ++i) {
    size_t comma = names.find(',', pos);
    std::string_view n = std::string_view(names).substr(
        pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? names.size() : comma + 1;
    if (i)
      text += ' ';
    if (n.empty())
      fmt::format_to(std::back_inserter(text), "a{}={}", i, e.args[i]);
    else
      fmt::format_to(std::back_inserter(text), "{}={}", n, e.args[i]);
  }
  AppendCsvField(out, text);
}

}  // namespace

StatusOr<ExportStats> ExportCsv(const model::Session& session,
                                const ExportOptions& options,
                                const std::string& out) {
  OutFile file;
  PARMON_RETURN_IF_ERROR(file.Open(out));
  const auto& schema = session.reader().schema();
  const uint64_t start = session.start();
  std::string& buf = file.buffer();
  buf += "time_ns,location,pid,tid,rank,thread,kind,name,args,payload\n";
  ExportStats stats;
  LocationCache locations(session);
  model::Merge merge(session, WindowFilter(session, options));
  merge.Run([&](const format::Event& e, model::StreamIndex) {
    ++stats.events_read;
    const LocationCache::Info& where = locations.Of(e.location);
    fmt::format_to(std::back_inserter(buf), "{},{},{},{},", e.ts >= start ? e.ts - start : 0,
                   e.location, where.pid, where.tid);
    if (where.rank >= 0)
      fmt::format_to(std::back_inserter(buf), "{}", where.rank);
    buf += ',';
    AppendCsvField(&buf, where.name);
    buf += ',';
    if (schema.Known(e.kind))
      buf += schema.name(e.kind);
    else
      fmt::format_to(std::back_inserter(buf), "kind{}", e.kind);
    buf += ',';
    const int named = NamedArg(e.kind_enum());
    if (named >= 0 && named < e.nargs)
      AppendCsvField(&buf, NameOf(session, e.args[named]));
    buf += ',';
    AppendArgs(&buf, schema, e);
    buf += ',';
    if (!e.payload.empty()) {
      if (Printable(e.payload))
        AppendCsvField(&buf, e.payload);
      else
        fmt::format_to(std::back_inserter(buf), "<{} bytes>", e.payload.size());
    }
    buf += '\n';
    ++stats.records_written;
    file.Maybe();
  });
  PARMON_RETURN_IF_ERROR(file.Close());
  return stats;
}

}  // namespace parmon::exporter
