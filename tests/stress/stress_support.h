// Helpers of the stress tests (tests/stress): run `parmon record` while watching the recorder's
// memory from outside, and count a trace's events per thread in the terms the programs under
// test keep their own counts in (tests/stress/*.c write them to a side file).
//
// Memory is read from /proc/PID/status of the recorder (VmRSS, VmHWM, RssAnon) every sampling
// period until it exits, and wait4's rusage gives ru_maxrss at the end. The polled VmHWM is a
// lower bound of the recorder's peak (it misses at most the last period); ru_maxrss is an upper
// bound (it is the largest of the recorder and the processes it waited for, the program too).
// RssAnon is the recorder's private memory, without the shared rings it maps.
#ifndef PARMON_TESTS_STRESS_STRESS_SUPPORT_H_
#define PARMON_TESTS_STRESS_STRESS_SUPPORT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace parmon::stress {

// PARMON_STRESS_SCALE (default 1): bench/stress.sh runs the same tests longer and bigger.
double Scale();

struct MemSample {
  double t_s = 0;         // since the recorder started
  uint64_t rss_kib = 0;   // VmRSS
  uint64_t anon_kib = 0;  // RssAnon
};

struct WatchedRun {
  int exit_code = -1;  // 128+signal when killed; -1 when it could not run
  bool timed_out = false;
  double wall_s = 0;
  std::string err;                 // its stderr
  int pid = 0;                     // the recorder's pid
  uint64_t polled_hwm_kib = 0;     // largest VmHWM read while it ran
  uint64_t polled_anon_kib = 0;    // largest RssAnon read while it ran
  uint64_t rusage_maxrss_kib = 0;  // wait4: max of the recorder and what it waited for
  std::vector<MemSample> samples;
};

// Runs `parmon ARGS` (stdout and stderr to files under scratch_dir), samples its memory every
// period_ms, calls on_tick (if any) with the recorder's pid after each sample, and kills its
// process group after timeout_s.
WatchedRun RunWatched(const std::vector<std::string>& args,
                      const std::string& scratch_dir,
                      double timeout_s,
                      int period_ms = 50,
                      const std::function<void(int pid)>& on_tick = nullptr);

// Per thread location of a trace: what the program emitted and what the recorder says of it.
struct ThreadCensus {
  uint32_t pid = 0, tid = 0;
  std::string name;
  uint64_t program_events = 0;  // source runtime, Lost excluded
  uint64_t lost = 0;            // Lost and RingLost counts (program's events only)
  uint64_t evicted = 0;         // of which RingLost (recorder): a thread ended full, or a flight
                                // recorder overwrote them
  uint64_t task_start = 0, task_exit = 0;
  uint64_t regions = 0;   // RegionEnter + RegionLeave
  uint64_t counters = 0;  // CounterInt
  uint64_t markers = 0;
  // Counter values in stream order: the first one kept, the last, whether they only increase,
  // and the losses counted after the first kept one (a flight recorder's window is a suffix).
  int64_t first_counter = -1, last_counter = -1;
  bool counters_increase = true;
  uint64_t lost_after_first_counter = 0;
};

struct TraceCensus {
  bool ok = false;
  std::string error;  // why not ok
  bool closed_cleanly = false;
  bool any_sched = false;  // context-switch records present
  uint64_t total_events = 0;
  uint64_t overwritten_events = 0;
  std::map<uint32_t, uint32_t> process_ppid;  // every process of the session: pid -> ppid
  std::map<uint32_t, ThreadCensus> threads;   // by tid
};

TraceCensus TakeCensus(const std::string& trace);
// The thread of the trace with this name (null when none).
const ThreadCensus* ThreadNamed(const TraceCensus& c, const std::string& name);

// A program built next to the tests.
std::string Prog(const std::string& name);

// "key=value" words anywhere in a side file; and its remaining lines of one number each.
std::map<std::string, long> SideValues(const std::string& path);
std::vector<long> SideNumbers(const std::string& path);

}  // namespace parmon::stress

#endif  // PARMON_TESTS_STRESS_STRESS_SUPPORT_H_
