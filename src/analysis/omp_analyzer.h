// The analysis engine's OpenMP part: it reads the OMPT events (kinds 34-41, docs/openmp.md) of
// each thread in time order and books, per thread, its implicit tasks (time in regions) and the
// waits inside them, and per parallel region instance each team member's work, folding an
// instance into its construct's totals as soon as its last member is done.
//
// Every span arrives as one event at its end carrying its begin, so a thread's waits come before
// the implicit task that holds them: they wait in a short per-thread list until the task ends
// and takes those that began inside it (waits outside any region count for the thread but not for
// a region). Explicit tasks run inside a barrier wait are taken out of that wait. A worker's
// closing barrier and implicit task end at its region's end (see RegionEnd). A team of one's
// region is one OmpSoloRegion, booked as its region and its only implicit task.
//
// Memory: per OpenMP thread, per construct, per instance still open (a team's members finish
// within microseconds of each other; at most kMaxOpen are kept, the oldest folded early) and a
// per-thread list capped at kMaxPending entries. Nothing grows with the number of events.
#ifndef PARMON_SRC_ANALYSIS_OMP_ANALYZER_H_
#define PARMON_SRC_ANALYSIS_OMP_ANALYZER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "analysis/omp_results.h"
#include "format/event.h"

namespace parmon::analysis {

class OmpAnalyzer {
 public:
  // Spans that began before the analysed window count from its start (--from).
  void SetWindowStart(uint64_t ts) { window_start_ = ts; }
  // One OMPT event of the thread at location `loc` (process pid, thread tid).
  void Consume(uint32_t loc, uint32_t pid, uint32_t tid, const format::Event& e);
  // The profile of what was consumed; `name` gives a string id's text, `label` a location's,
  // `span` the times of a location's first and last events of any kind in the window: a thread's
  // span ends at the last (the master's serial time after its last region), and the master's
  // starts at the first (its serial time before the first region, when libomp is not even
  // started). Leaves the analyzer as it was.
  void Build(const std::function<std::string(uint32_t)>& name,
             const std::function<std::string(uint32_t)>& label,
             const std::function<std::pair<uint64_t, uint64_t>(uint32_t)>& span,
             OmpProfile* out) const;

 private:
  static constexpr size_t kMaxOpen = 4096;
  static constexpr size_t kMaxPending = 4096;
  enum WaitKind : uint8_t { kBarrierImplicit, kBarrierExplicit, kSyncOther, kLock, kTask };
  struct Pending {
    WaitKind kind;
    uint64_t begin, ns;
  };
  struct Thread {
    uint32_t pid = 0, tid = 0;
    bool master = false;
    uint64_t first = UINT64_MAX, last = 0;
    bool ended = false;
    std::deque<Pending> pending;
    OmpThreadResult r;
  };
  struct Instance {
    uint32_t construct = 0;
    uint64_t begin = 0, end = 0;
    bool ended = false;
    uint32_t team = 0, done = 0;
    std::vector<uint64_t> work, barrier, implicit;  // by thread number
    uint64_t seq = 0;                               // opening order, to fold the oldest first
  };
  struct Construct {
    OmpRegionResult r;
    double mean_sum = 0;
  };
  using InstanceKey = std::pair<uint32_t, uint64_t>;   // pid, region id
  using ConstructKey = std::pair<uint32_t, uint32_t>;  // pid, construct string id

  void Wait(Thread& t, WaitKind kind, uint64_t begin, uint64_t end);
  void TaskEnd(Thread& t, const format::Event& e);
  // libomp reports a worker's closing barrier and implicit task end only when the worker leaves
  // its fork barrier (the next region, or the runtime's shut-down): both ended, in fact, when
  // the region did. ts clipped to the end of the region when that is known.
  uint64_t RegionEnd(uint32_t pid, uint64_t region, uint64_t ts) const;
  Instance& Open(uint32_t pid, uint64_t region);
  // The instance of a region whose end (OmpParallel, OmpSoloRegion) was seen, with its span.
  Instance& RegionEnded(uint32_t pid,
                        uint64_t region,
                        uint64_t construct,
                        uint64_t begin,
                        uint64_t end);
  static void Fold(std::map<ConstructKey, Construct>& constructs, uint32_t pid, const Instance& in);

  std::map<uint32_t, Thread> threads_;  // by location
  std::map<InstanceKey, Instance> open_;
  std::map<ConstructKey, Construct> constructs_;
  uint64_t seq_ = 0;
  uint64_t window_start_ = 0;
  bool ompt_ = false, libgomp_ = false;
  std::string runtime_;
  std::map<uint32_t, std::string> runtime_of_pid_;  // OmpProfile::runtime_of_pid
};

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_OMP_ANALYZER_H_
