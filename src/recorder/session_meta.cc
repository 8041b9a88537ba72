#include "recorder/session_meta.h"

#include <unistd.h>

#include "format/session_info.h"

namespace parmon::recorder {

KeyValues SessionValues(const SessionFacts& f) {
  std::string command;
  for (const auto& a : f.argv) {
    if (!command.empty())
      command += ' ';
    command += a.find(' ') == std::string::npos ? a : "'" + a + "'";
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const char* overflow = f.overflow == shm::Overflow::kBlock  ? "block"
                         : f.overflow == shm::Overflow::kDrop ? "drop"
                                                              : "overwrite";
  format::SessionInfo s;
  s.parmon_version = PARMON_VERSION;
  s.command = command;
  s.host = host;
  s.start_realtime_ns = f.start_realtime_ns;
  s.start_ts = f.start_ns;
  s.clock = f.clock->Describe();
  s.clock_base = f.clock->base == ClockBase::kPerf ? "perf" : "monotonic";
  s.recorder_pid = static_cast<uint32_t>(getpid());
  s.overflow = overflow;
  s.ring_bytes = f.ring_bytes;
  s.ring_count = f.ring_count;
  s.cpus = static_cast<uint32_t>(sysconf(_SC_NPROCESSORS_ONLN));
  // The command line's own values (mode, period, MPI rank, ...) are written as given; the
  // decoder reads the ones it knows into their typed fields.
  for (const auto& [key, value] : f.extra)
    s.extra[key] = value;
  return format::EncodeSession(s);
}

KeyValues EndValues(const EndFacts& f) {
  format::EndInfo e;
  e.end_ts = f.end_ns;
  e.exit_code = f.exit_code;
  e.lost_events = f.lost;
  e.lost_by_location = f.lost_by_location;
  e.held_by_location = f.held_by_location;
  e.overwritten_events = f.overwritten;
  e.unattached_lost_events = f.unattached_lost;
  e.ring_corruptions = f.ring_corruptions;
  e.recorder_cpu_ns = f.recorder_cpu_ns;
  e.children_cpu_ns = f.children_cpu_ns;
  KeyValues kv = format::EncodeEnd(e);
  for (const auto& extra : f.extra)  // the sources' totals
    kv.push_back(extra);
  return kv;
}

}  // namespace parmon::recorder
