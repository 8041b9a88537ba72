#include "recorder/session_meta.h"

#include <unistd.h>

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
  KeyValues kv = {
      {"parmon_version", PARMON_VERSION},
      {"command", command},
      {"host", host},
      {"start_realtime_ns", std::to_string(f.start_realtime_ns)},
      {"start_ts", std::to_string(f.start_ns)},
      {"clock", f.clock->Describe()},
      {"clock_base", f.clock->base == ClockBase::kPerf ? "perf" : "monotonic"},
      {"recorder_pid", std::to_string(getpid())},
      {"overflow", overflow},
      {"ring_bytes", std::to_string(f.ring_bytes)},
      {"ring_count", std::to_string(f.ring_count)},
      {"cpus", std::to_string(sysconf(_SC_NPROCESSORS_ONLN))},
  };
  for (const auto& extra : f.extra)
    kv.push_back(extra);
  return kv;
}

KeyValues EndValues(const EndFacts& f) {
  KeyValues kv = {
      {"end_ts", std::to_string(f.end_ns)},
      {"exit_code", std::to_string(f.exit_code)},
      {"lost_events", std::to_string(f.lost)},
      {"lost_by_location", f.lost_by_location},
      {"overwritten_events", std::to_string(f.overwritten)},
      {"unattached_lost_events", std::to_string(f.unattached_lost)},
      {"ring_corruptions", std::to_string(f.ring_corruptions)},
      {"recorder_cpu_ns", std::to_string(f.recorder_cpu_ns)},
      {"children_cpu_ns", std::to_string(f.children_cpu_ns)},
  };
  for (const auto& extra : f.extra)
    kv.push_back(extra);
  return kv;
}

}  // namespace parmon::recorder
