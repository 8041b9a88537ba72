// The session's metadata, built in one place: the SESSION record's key/values (what was run,
// where, on which clock, with which rings) and the END record's (how it ended, what was lost,
// what the recording cost). Plain facts in, key/values out through the one typed encoder of each
// record (format/session_info), which the readers' one decoder mirrors.
#ifndef PARMON_SRC_RECORDER_SESSION_META_H_
#define PARMON_SRC_RECORDER_SESSION_META_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "runtime/shm_abi.h"

namespace parmon::recorder {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

struct SessionFacts {
  std::vector<std::string> argv;  // the command (empty with -p)
  uint64_t start_realtime_ns = 0;
  uint64_t start_ns = 0;
  const TickConversion* clock = nullptr;
  shm::Overflow overflow = shm::Overflow::kBlock;
  uint64_t ring_bytes = 0;  // as the segment has them (rounded up)
  uint32_t ring_count = 0;
  KeyValues extra;  // the command line's own (mode, period, MPI rank, ...)
};

struct EndFacts {
  uint64_t end_ns = 0;
  int exit_code = 0;
  uint64_t lost = 0;
  std::map<uint32_t, uint64_t> lost_by_location;
  std::map<uint32_t, uint64_t> held_by_location;  // ns on full rings (--overflow block)
  uint64_t overwritten = 0;
  uint64_t unattached_lost = 0;
  uint64_t ring_corruptions = 0;
  uint64_t recorder_cpu_ns = 0;
  uint64_t children_cpu_ns = 0;
  KeyValues extra;  // the sources' totals
};

KeyValues SessionValues(const SessionFacts& facts);
KeyValues EndValues(const EndFacts& facts);

}  // namespace parmon::recorder

#endif  // PARMON_SRC_RECORDER_SESSION_META_H_
