// ExportChromeJson: the Chrome trace event format (the JSON object form), which chrome://tracing,
// ui.perfetto.dev and speedscope open. Per thread ("pid"/"tid" are the process and thread ids):
//   - regions and MPI calls as "B"/"E" slices (cat "region" / "mpi"), nested as recorded; inside
//     a window, leaves whose enter lies before it are dropped and what is open at its end is
//     closed at the last exported time (export_common.h, Nesting);
//   - point-to-point messages as flow events "s" (in the send call) and "f" (in the call that
//     completed the receive, "bp":"e"), cat "message", one id per matched message;
//   - markers as thread-scoped instants "i", counters as "C" events of their process, lost events
//     as instants named "lost N events";
//   - "M" metadata: process_name ("rank R (pid P)" or the command) and thread_name per thread.
// Times are microseconds (with ns decimals) from the session start, on rank 0's clock. Events
// are written as they come from the merge: memory does not grow with the trace.
#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "export/export.h"
#include "export/export_common.h"

namespace parmon::exporter {
namespace {

using format::Kind;

class ChromeWriter {
 public:
  ChromeWriter(const model::Session& session, OutFile* file)
      : session_(session), file_(file), buf_(file->buffer()), start_(session.start()) {}

  void Metadata() {
    buf_ += "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
    std::set<uint32_t> pids;
    for (const auto& [id, l] : session_.definitions().locations) {
      if (l.type != format::LocationType::kThread)
        continue;
      if (pids.insert(l.pid).second) {
        Open("M", "process_name", nullptr, id);
        buf_ += ",\"args\":{\"name\":";
        AppendJsonString(&buf_, ProcessLabel(session_, id));
        buf_ += "}}";
        const int64_t rank = session_.RankOf(id);
        if (rank >= 0) {
          Open("M", "process_sort_index", nullptr, id);
          fmt::format_to(std::back_inserter(buf_), ",\"args\":{{\"sort_index\":{}}}}}", rank);
        }
      }
      Open("M", "thread_name", nullptr, id);
      buf_ += ",\"args\":{\"name\":";
      AppendJsonString(&buf_, ThreadLabel(session_, id));
      buf_ += "}}";
    }
  }

  void Event(const format::Event& e) {
    last_ts_ = std::max(last_ts_, e.ts);
    switch (e.kind_enum()) {
      case Kind::kRegionEnter:
      case Kind::kMpiEnter: {
        Frame f{static_cast<uint32_t>(e.args[0]), e.kind_enum() == Kind::kMpiEnter};
        nesting_.Enter(e.location, f);
        Slice("B", f, e.location, e.ts);
        break;
      }
      case Kind::kRegionLeave:
      case Kind::kMpiLeave: {
        Frame f{static_cast<uint32_t>(e.args[0]), e.kind_enum() == Kind::kMpiLeave};
        nesting_.Leave(e.location, f, [&](const Frame& g) { Slice("E", g, e.location, e.ts); });
        break;
      }
      case Kind::kMpiSend:
      case Kind::kMpiRecv: {
        const bool send = e.kind_enum() == Kind::kMpiSend;
        const int64_t me = locations_.Of(e.location).rank;
        const int64_t peer = static_cast<int64_t>(e.args[0]);
        const uint64_t id = send ? ids_.Send(me, peer, e.args[2], e.args[1])
                                 : ids_.Recv(peer, me, e.args[2], e.args[1]);
        Open(send ? "s" : "f", "message", &e, e.location);
        fmt::format_to(std::back_inserter(buf_),
                       ",\"cat\":\"message\",\"id\":{}{},\"args\":{{\"{}\":{},\"tag\":{},"
                       "\"comm\":{},\"bytes\":{}}}}}",
                       id, send ? "" : ",\"bp\":\"e\"", send ? "to" : "from", peer,
                       static_cast<int64_t>(e.args[1]), e.args[2], e.args[3]);
        break;
      }
      case Kind::kMarker:
        Open("i", NameOf(session_, e.args[0]), &e, e.location);
        buf_ += ",\"cat\":\"marker\",\"s\":\"t\"}";
        break;
      case Kind::kCounterInt:
      case Kind::kCounterDouble: {
        Open("C", NameOf(session_, e.args[0]), &e, e.location);
        if (e.kind_enum() == Kind::kCounterInt) {
          fmt::format_to(std::back_inserter(buf_), ",\"args\":{{\"value\":{}}}}}",
                         static_cast<int64_t>(e.args[1]));
        } else {
          double v;
          std::memcpy(&v, &e.args[1], sizeof v);
          if (v != v || v - v != 0)  // NaN or infinite: JSON has no such number
            v = 0;
          fmt::format_to(std::back_inserter(buf_), ",\"args\":{{\"value\":{}}}}}", v);
        }
        break;
      }
      case Kind::kLost:
      case Kind::kRingLost:
        Open("i", fmt::format("lost {} events", e.args[0]), &e, e.location);
        buf_ += ",\"cat\":\"loss\",\"s\":\"t\"}";
        break;
      default:
        return;
    }
    file_->Maybe();
  }

  void Finish() {
    nesting_.CloseAll([&](uint32_t loc, const Frame& f) { Slice("E", f, loc, last_ts_); });
    buf_ += "\n]}\n";
  }

  uint64_t records() const { return records_; }

 private:
  // `{"ph":..,"name":..,"pid":..,"tid":..[,"ts":..]` (the caller closes the object).
  void Open(const char* ph, std::string_view name, const format::Event* e, uint32_t location) {
    buf_ += records_++ ? ",\n{\"ph\":\"" : "\n{\"ph\":\"";
    buf_ += ph;
    buf_ += "\",\"name\":";
    AppendJsonString(&buf_, name);
    const LocationCache::Info& where = locations_.Of(location);
    fmt::format_to(std::back_inserter(buf_), ",\"pid\":{},\"tid\":{}", where.pid, where.tid);
    if (e)
      Time(e->ts);
  }
  void Time(uint64_t ts) {
    const uint64_t rel = ts >= start_ ? ts - start_ : 0;
    fmt::format_to(std::back_inserter(buf_), ",\"ts\":{}.{:03}", rel / 1000, rel % 1000);
  }
  void Slice(const char* ph, const Frame& f, uint32_t location, uint64_t ts) {
    Open(ph, NameOf(session_, f.name), nullptr, location);
    Time(ts);
    buf_ += f.mpi ? ",\"cat\":\"mpi\"}" : ",\"cat\":\"region\"}";
  }

  const model::Session& session_;
  OutFile* file_;
  std::string& buf_;
  const uint64_t start_;
  uint64_t last_ts_ = 0;
  uint64_t records_ = 0;
  Nesting nesting_;
  MessageIds ids_;
  LocationCache locations_{session_};
};

}  // namespace

StatusOr<ExportStats> ExportChromeJson(const model::Session& session,
                                       const ExportOptions& options,
                                       const std::string& out) {
  OutFile file;
  PARMON_RETURN_IF_ERROR(file.Open(out));
  ChromeWriter writer(session, &file);
  writer.Metadata();
  ExportStats stats;
  model::Merge merge(session, WindowFilter(session, options));
  merge.Run([&](const format::Event& e, model::StreamIndex) {
    ++stats.events_read;
    writer.Event(e);
  });
  writer.Finish();
  PARMON_RETURN_IF_ERROR(file.Close());
  stats.records_written = writer.records();
  return stats;
}

}  // namespace parmon::exporter
