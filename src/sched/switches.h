// Context switches from perf_event_open: one software "dummy" event per CPU for the session's
// tasks with context_switch = 1 (PERF_RECORD_SWITCH, Linux 4.3), which the kernel allows for a
// user's own processes at perf_event_paranoid 2 once kernel samples are excluded. inherit = 1
// carries the events into every thread and process the task creates after the event exists, and
// the kernel writes an inherited event's records into its parent's buffer, so one buffer per CPU
// collects the whole session. task = 1 adds FORK/EXIT records (exact thread creation and end).
//
// Ownership: everything here runs on the recorder's thread (ChildCreated, Start, Poll, Stop).
// Records reach us per CPU, each buffer in time order; a thread's switch-out on one CPU and its
// switch-in on another come from different buffers, so Poll merges records by time and holds
// back the newest few milliseconds, which another CPU's buffer may still be filling.
#ifndef PARMON_SRC_SCHED_SWITCHES_H_
#define PARMON_SRC_SCHED_SWITCHES_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "format/session_info.h"
#include "recorder/source_sink.h"
#include "sched/activity.h"
#include "sched/switch_budget.h"

namespace parmon::sched {

struct SwitchOptions {
  bool periodic = false;  // --mode periodic: SwitchCounts per interval, no single switches
  uint64_t period_ns = 10'000'000;
  std::set<uint32_t> only_tids;  // --threads: empty = every thread
  bool attached = false;
  uint32_t buffer_pages = 64;                // data pages per CPU buffer (a power of two)
  std::shared_ptr<SwitchActivity> activity;  // shared with the sampler; made here when null
  // Trace mode: the share of the program's CPU time the records may cost over a window
  // before they are stopped (switch_budget.h); 0 = keep them all.
  double budget = 0;
  double record_cost_ns = format::kDefaultSwitchRecordCostNs;
  uint64_t budget_window_ns = 200'000'000;
};

class SwitchRecorder : public recorder::RecorderSource {
 public:
  explicit SwitchRecorder(SwitchOptions options);
  ~SwitchRecorder() override;
  const char* name() const override { return "context switches"; }
  Status ChildCreated(recorder::SourceSink& recorder, pid_t pid) override;
  Status Start(recorder::SourceSink& recorder) override;
  void Poll(recorder::SourceSink& recorder, uint64_t now_ns) override;
  void Stop(recorder::SourceSink& recorder) override;
  void SetPeriod(uint64_t period_ns) override { options_.period_ns = period_ns; }

  // Records read and lost so far (the benchmark's denominator).
  uint64_t records() const { return records_; }
  // The budget stopped the records (then at stopped_ns(), on the session clock); 0: not stopped.
  uint64_t stopped_ns() const { return stopped_ns_; }
  uint64_t lost() const { return lost_; }
  // Opens the events for tasks (per CPU); inherit: follow what they create.
  Status Open(const std::vector<pid_t>& tasks,
              bool inherit,
              bool enable_on_exec,
              bool monotonic_clock);
  // Reads every buffer into pending_ and emits records older than until_ns.
  void Drain(recorder::SourceSink* recorder, uint64_t until_ns);
  // Turns the opened events off and on again (switch_cost.cc's alternating blocks).
  void Enable(bool on);
  const std::shared_ptr<SwitchActivity>& activity() const { return options_.activity; }

 private:
  struct Buffer {
    int cpu = -1;
    int fd = -1;  // the event that owns the mmap; others redirect to it
    void* base = nullptr;
    size_t size = 0;
  };
  struct Record {
    uint64_t ts;
    uint32_t pid, tid;
    uint32_t cpu;
    uint16_t type;
    uint16_t misc;
    uint64_t a, b;  // LOST: count; FORK/EXIT: pid, ppid / parent tid
  };
  struct ThreadTrack {
    uint32_t pid = 0;
    int32_t last_cpu = -1;
    bool on_cpu = false;
    uint64_t in_ts = 0;
    // --mode periodic
    uint64_t switch_ins = 0, preempted = 0, blocked = 0, migrations = 0, on_cpu_ns = 0;
    bool active = false;  // anything to report this interval
  };

  friend class SwitchActivity;
  // Both need activity mu_ held: the sampler's thread reads the buffers too.
  void ReadBuffer(Buffer& b);
  void ReadBuffers();
  void Handle(recorder::SourceSink* recorder, const Record& r);
  void FlushInterval(recorder::SourceSink* recorder, uint64_t end_ns);
  // The budget was exceeded: turns the records off for every thread of the session, keeps those
  // written until then and says so in the definitions stream (SwitchesStopped).
  void StopForBudget(recorder::SourceSink& recorder);
  bool Wanted(uint32_t tid) const;

  SwitchOptions options_;
  std::vector<Buffer> buffers_;
  std::vector<int> fds_;
  // Guarded by options_.activity->mu_: records read and not yet handled; the first
  // pending_sorted_ are in time order, and each of pending_run_ends_ ends one buffer's read.
  std::vector<Record> pending_;
  size_t pending_sorted_ = 0;
  std::vector<size_t> pending_run_ends_;
  std::map<uint32_t, ThreadTrack> threads_;
  uint64_t interval_start_ = 0;
  std::atomic<uint64_t> records_{0};  // counted on whichever thread reads the buffers
  uint64_t lost_ = 0;
  bool opened_ = false;
  SwitchBudget budget_;
  uint64_t stopped_ns_ = 0;
  std::string open_error_;
  std::vector<uint8_t> scratch_;
};

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_SWITCHES_H_
