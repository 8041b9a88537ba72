// Time inside MPI calls against the kernel's view of a thread (issue 11): Open MPI polls,
// sleeps in nanosleep and takes internal locks while a rank waits for its partner, so the
// sampler books that time as running, sleeping or waiting on locks. The analysis moves every
// nanosecond a rank spent inside an MPI call out of those states: communication calls into
// comm wait (what the kernel saw stays as detail, MpiTime::inside), MPI_Init/Init_thread/
// Finalize out of the states altogether (they are start-up and shut-down, reported apart).
//
// Trace mode knows each call's span, so the move is exact per sampler interval (each
// ThreadStates event). Periodic mode knows only each flush's total, spread over the span since
// the previous flush, so the move is per report interval. Within a span the waits the kernel saw
// are taken first (a program that waits inside MPI waits there), then running and queued time
// in proportion.
#ifndef PARMON_SRC_ANALYSIS_MPI_TIME_H_
#define PARMON_SRC_ANALYSIS_MPI_TIME_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "analysis/results.h"
#include "format/thread_state.h"

namespace parmon::analysis {

struct MpiFuncAgg {
  uint64_t calls = 0, ns = 0;
};

// A location's time inside MPI calls, cumulated: `comm` outside start-up and shut-down, `init`
// inside MPI_Init/Init_thread/Finalize (closed calls; the open call's part is added up to the
// time asked). `at_*` are the values at the end of the last sample moved.
// Periodic mode: a sampler interval held until the MPI time of its span is known, and a span
// of MPI time from one flush (spread evenly over it).
struct HeldSample {
  uint64_t ts = 0, span = 0;
  uint64_t args[format::kThreadStateCount] = {};
};
struct MpiCell {
  uint64_t from = 0, to = 0, ns = 0;
  bool comm = true;  // else start-up or shut-down
};

struct MpiTime {
  bool active = false;  // this location made an MPI call
  uint64_t comm = 0, init = 0;
  uint64_t at_comm = 0, at_init = 0;
  // What the kernel said the thread did while inside MPI communication calls, per state.
  StateTimes inside{};
  // A rank's states cover its run, from MPI_Init's return to MPI_Finalize's call (mpiP's
  // application time): the states before MPI_Init's call are taken out at the end, and samples
  // after MPI_Finalize returned are dropped (trace mode; periodic mode does both per flush).
  bool init_seen = false;
  StateTimes before_init{};
  uint64_t finalize_left = 0;
  // Periodic mode: samples not applied yet, flushes not applied yet, where the current flush's
  // span starts and ends (the previous flush, or MPI_Init's return), and up to where samples
  // can be applied (no later flush reaches before it).
  std::deque<HeldSample> held;
  std::deque<MpiCell> cells;
  uint64_t flush_from = 0, flush_to = 0, init_end = 0, release_to = 0;
  std::vector<MpiFuncAgg> by_func;  // calls and time per function string id
  // Trace mode: calls and time per call site and function, by (site string id << 32 | function).
  absl::flat_hash_map<uint64_t, MpiFuncAgg> by_site;
};

// Counts calls and time of the function with string id `func` (ids are small and dense).
inline void AddFuncTime(MpiTime& t, uint32_t func, uint64_t calls, uint64_t ns) {
  constexpr uint32_t kMaxDenseId = 1u << 20;
  if (func >= kMaxDenseId)
    return;
  if (func >= t.by_func.size())
    t.by_func.resize(std::max<size_t>(func + 1, t.by_func.size() * 2));
  t.by_func[func].calls += calls;
  t.by_func[func].ns += ns;
}

// The MPI profile of the run (Results::mpi): the ranks' MPI share and each function's time
// across ranks, from the locations' per-function times.
void BuildMpiProfile(Results* res);
// Resolves the locations' call sites (call_sites.cc) and sums them per site and function over the
// ranks into Results::mpi.call_sites. Called by BuildMpiProfile.
void BuildMpiCallSites(Results* res);

// Takes MPI time out of a state split (format/thread_state.h; also used by the sampler's
// self-monitoring publisher, so that a program's read books MPI time as the report does).
using format::TakeMpiTime;

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_MPI_TIME_H_
