// `parmon export`: a session into the formats other tools read (docs/export.md). Every exporter
// reads the session through model::Merge (one merged, clock-aligned stream, memory flat in the
// event count) and writes as it goes.
#ifndef PARMON_SRC_EXPORT_EXPORT_H_
#define PARMON_SRC_EXPORT_EXPORT_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "model/session.h"

namespace parmon::exporter {

struct ExportOptions {
  // Window, in ns from the session start (as `report --from/--to`); UINT64_MAX = to the end.
  uint64_t from_ns = 0;
  uint64_t to_ns = UINT64_MAX;
};

// What an export wrote, for the one-line summary `parmon export` prints.
struct ExportStats {
  uint64_t events_read = 0;      // events of the session in the window
  uint64_t records_written = 0;  // records of the output format
};

// OTF2 archive: out is the archive's directory (created), holding out/traces.otf2.
StatusOr<ExportStats> ExportOtf2(const model::Session& session,
                                 const ExportOptions& options,
                                 const std::string& out);
// Perfetto protobuf trace (a file ui.perfetto.dev and trace_processor open).
StatusOr<ExportStats> ExportPerfetto(const model::Session& session,
                                     const ExportOptions& options,
                                     const std::string& out);
// Chrome trace event format (JSON), for small traces and chrome://tracing.
StatusOr<ExportStats> ExportChromeJson(const model::Session& session,
                                       const ExportOptions& options,
                                       const std::string& out);
// One CSV row per event.
StatusOr<ExportStats> ExportCsv(const model::Session& session,
                                const ExportOptions& options,
                                const std::string& out);

}  // namespace parmon::exporter

#endif  // PARMON_SRC_EXPORT_EXPORT_H_
