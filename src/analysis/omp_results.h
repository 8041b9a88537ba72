// What the report says about OpenMP (docs/openmp.md): per OpenMP thread the split of its time
// into work, barrier wait, lock wait, explicit-task time and idle (workers, between regions) or
// serial (the master, outside regions), and per parallel construct the load imbalance of its
// instances. Built from the OMPT events of libparmon_omp (src/omp) by omp_analyzer.cc; part of
// Results (results.h) and rendered by omp_views.cc.
#ifndef PARMON_SRC_ANALYSIS_OMP_RESULTS_H_
#define PARMON_SRC_ANALYSIS_OMP_RESULTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace parmon::analysis {

struct OmpThreadResult {
  uint32_t location = 0;
  std::string label;
  uint32_t pid = 0, tid = 0;
  bool master = false;      // the process's initial thread (OMPT thread type initial)
  uint64_t regions = 0;     // implicit tasks it ran (parallel regions it took part in)
  uint64_t span_ns = 0;     // from its first OpenMP event to its last (or its end), in the window
  uint64_t region_ns = 0;   // inside implicit tasks
  uint64_t work_ns = 0;     // region_ns minus its barrier, other sync and lock waits
  uint64_t barrier_ns = 0;  // implicit and explicit barrier waits, tasks run there excluded
  uint64_t barrier_implicit_ns = 0;  // of which implicit (the end of a region or a loop)
  uint64_t sync_other_ns = 0;        // taskwait, taskgroup, reduction waits
  uint64_t lock_ns = 0;              // waiting for locks, critical sections, ordered, atomics
  uint64_t task_ns = 0;              // running explicit tasks
  uint64_t idle_ns = 0;              // a worker: span_ns outside regions
  uint64_t serial_ns = 0;            // the master: span_ns outside regions
};

// One parallel construct (a `#pragma omp parallel` in the code) of one process, over its
// instances in the window. A thread's work in an instance is its implicit task's time minus its
// waits in it; imbalance = sum over instances of the slowest thread's work / sum of the mean.
struct OmpRegionResult {
  // Where the construct is: "omp_imbalance.c:58 (main)" (analysis/call_sites.h), "?" when unknown
  std::string construct;
  uint32_t pid = 0;
  uint64_t instances = 0;
  uint32_t team_size = 0;  // the largest team seen
  uint64_t wall_ns = 0;    // sum of the instances' durations (master's begin to end)
  uint64_t max_work_ns = 0;
  double mean_work_ns = 0;
  double imbalance = 1;  // max_work_ns / mean_work_ns (1: balanced)
  uint64_t lost_ns = 0;  // sum over instances of (slowest - mean): wall time imbalance costs
  std::vector<uint64_t> thread_work_ns;              // by thread number in the team, summed
  std::vector<uint64_t> thread_barrier_ns;           // by thread number in the team, summed
  std::vector<uint64_t> thread_barrier_implicit_ns;  // of which implicit barriers
};

struct OmpProfile {
  bool ompt = false;     // an OpenMP runtime with OMPT reported to parmon
  std::string runtime;   // its version string ("LLVM OMP version: 5.0.20140926")
  bool libgomp = false;  // a process ran on GCC's libgomp, which has no OMPT
  // The processes that ran an OpenMP runtime: "libgomp", or the OMPT runtime's version string.
  // Their threads' futex waits outside the program's lock calls are the runtime's (barriers,
  // idle workers), not the program's locks (rules/state_wait.cc).
  std::map<uint32_t, std::string> runtime_of_pid;
  std::string note;                      // one sentence when the OpenMP view is missing or partial
  std::vector<OmpThreadResult> threads;  // by pid, master first, then tid
  std::vector<OmpRegionResult> regions;  // by lost_ns, then wall_ns, descending
};

}  // namespace parmon::analysis

#endif  // PARMON_SRC_ANALYSIS_OMP_RESULTS_H_
