// Typed session metadata. A trace's SESSION chunk (written at the start) and END chunk (written at
// a clean close) hold key/value strings; these structs are their typed form, with one encoder (to
// the key/value list TraceWriter::WriteSession / Finish take) and one decoder (from
// TraceReader::session(), where the END values follow the SESSION ones). Decoding never throws and
// never refuses: a value that is not what its key promises reads as absent, and every such value
// is named in one sentence (SessionMetadata::warning: "bad session metadata: 'cpus' is not a
// number ('x'); it is read as absent"), so a consumer warns once and reads every event. Keys this
// parmon does not know are kept in `extra` and written back, so a trace from a newer recorder loses
// nothing when its values are decoded and encoded again.
//
// A value that is absent reads as zero / empty (older traces, a trace not closed cleanly), except
// where absence means something different from zero: exit_code, event_cost_ns, mpi_rank.
#ifndef PARMON_SRC_FORMAT_SESSION_INFO_H_
#define PARMON_SRC_FORMAT_SESSION_INFO_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/kinds.h"

namespace parmon::format {

// The key/value list the writer takes and the chunk holds.
using KeyValues = std::vector<std::pair<std::string, std::string>>;

// SESSION values: what was recorded, where, and how.
struct SessionInfo {
  std::string parmon_version;
  std::string command;
  std::string host;
  uint64_t start_realtime_ns = 0;  // wall-clock time of the start
  uint64_t start_ts = 0;           // session-clock time of the start
  std::string clock;               // a human description of the clock
  std::string clock_base;          // "perf" or "monotonic"
  uint32_t recorder_pid = 0;
  std::string overflow;  // "block", "drop" or "overwrite"
  uint64_t ring_bytes = 0;
  uint32_t ring_count = 0;
  uint32_t cpus = 0;
  uint64_t sample_period_ns = 0;
  std::string mode;
  std::optional<int64_t> mpi_rank;  // a per-rank session's file
  uint32_t mpi_size = 0;
  uint32_t session_files = 0;  // files of a per-rank session read as one (0: a single file)
  // Every other key (launcher, job, threads, attached_pid, newer recorders' keys), kept verbatim.
  std::map<std::string, std::string> extra;
};

// (location, source) of a stream: the key of the END chunk's per-stream totals.
using StreamKey = std::pair<uint32_t, Source>;

// Cost of one context-switch record in the switching thread when it was not measured (the
// recorder's budget during the run; the report of traces before the recorder measured it):
// sched_bench's BM_SwitchRecordCost, 410-470 ns on the development VM (2-CPU AMD EPYC, Linux 6.1).
inline constexpr double kDefaultSwitchRecordCostNs = 450;

// END values: the totals of a run that was closed cleanly.
struct EndInfo {
  uint64_t end_ts = 0;
  std::optional<int> exit_code;
  uint64_t lost_events = 0;
  std::map<uint32_t, uint64_t> lost_by_location;  // location -> events lost
  // location -> ns parmon held the thread on its full ring (--overflow block)
  std::map<uint32_t, uint64_t> held_by_location;
  uint64_t overwritten_events = 0;
  uint64_t unattached_lost_events = 0;
  uint64_t ring_corruptions = 0;
  uint64_t recorder_cpu_ns = 0;
  uint64_t children_cpu_ns = 0;
  std::optional<double> event_cost_ns;  // measured cost of one event in the program's thread
  uint64_t sampler_passes = 0;
  uint64_t sampler_overruns = 0;
  uint64_t sampler_cpu_ns = 0;
  uint64_t switch_records = 0;
  uint64_t switch_records_lost = 0;
  // What one context-switch record cost the switching thread, measured by the recorder at the
  // end of the run (sched/switch_cost.h), and the CPU that measurement took (in recorder_cpu_ns,
  // but after the program ended).
  std::optional<double> switch_record_cost_ns;
  uint64_t calibration_cpu_ns = 0;
  // Written by TraceWriter::Finish itself.
  uint64_t events = 0;
  uint64_t index_offset = 0;
  std::map<StreamKey, uint64_t> stream_totals;  // events written per stream
};

// Both chunks' values, as TraceReader::session() holds them.
struct SessionMetadata {
  SessionInfo session;
  EndInfo end;
  // Keys whose value was bad (decoded as absent), and one sentence naming them (empty if none).
  std::vector<std::string> bad_keys;
  std::string warning;
};

// SESSION chunk key/values (extra keys last, in key order).
KeyValues EncodeSession(const SessionInfo& s);
// END chunk key/values. The writer-owned keys (events, index_offset, stream_totals) are included
// only when set, so the recorder can pass this list to TraceWriter::Finish, which adds them.
KeyValues EncodeEnd(const EndInfo& e);
// "loc:n;..." and "loc:source:n;..." as the END chunk holds them (for TraceWriter::Finish).
std::string EncodeLostByLocation(const std::map<uint32_t, uint64_t>& counts);
std::string EncodeStreamTotals(const std::map<StreamKey, uint64_t>& totals);

// Decodes TraceReader::session() (SESSION and END values in one map). Keys of neither chunk go to
// session.extra. Bad values read as absent and are named in `warning`.
SessionMetadata DecodeSessionMetadata(const std::map<std::string, std::string>& kv);

}  // namespace parmon::format

#endif  // PARMON_SRC_FORMAT_SESSION_INFO_H_
