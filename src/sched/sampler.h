// The /proc sampler: every period, for every thread of the session, writes how it spent the
// interval (ThreadStates), its CPU time, last CPU and blocking system call (ThreadSample); per
// process its CPU time including threads gone between samples (ProcessSample); per CPU the busy
// and idle time (CpuSample).
//
// Two ways to a thread's interval. Without complete context-switch records (perf_event_open
// refused, records lost, a thread not yet seen switching) it reads schedstat (and, for a thread
// that ran, syscall and if need be stat) and splits the interval with ThreadAccount::Update.
// With them the thread is "timed": its switch-in, preempted and blocked records give running,
// queued and blocked time to the nanosecond, and /proc is read only for what records cannot
// tell: what a blocked thread waits in (syscall, re-read less often while it stays the same
// kind of wait) and the run-queue delay after its wake-ups (schedstat, every few passes).
//
// Threads: sampling runs on its own thread so the period is kept whatever the recorder's loop is
// doing. That thread owns every /proc file and account; it hands finished events, keyed by
// (pid, tid) or CPU, to the recorder's thread through a mutex-guarded queue, and Poll (on the
// recorder's thread) turns keys into locations and appends them. Processes the recorder learns
// about (from libparmon or the context-switch source) come the other way through the same mutex.
#ifndef PARMON_SRC_SCHED_SAMPLER_H_
#define PARMON_SRC_SCHED_SAMPLER_H_

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "format/event.h"
#include "recorder/source_sink.h"
#include "sched/activity.h"
#include "sched/classify.h"
#include "sched/proc.h"

namespace parmon::sched {

struct SamplerOptions {
  uint64_t period_ns = 10'000'000;
  std::set<uint32_t> only_tids;  // --threads: empty = every thread
  bool attached = false;         // following a process that was already running
  // The context-switch recorder's news (null without it): threads it saw no switch of since the
  // last pass are booked without reading /proc.
  std::shared_ptr<SwitchActivity> activity;
};

// A map from tid kept as a vector sorted by tid: a pass walks every thread, and a walk over
// contiguous entries costs a fraction of one over tree nodes scattered on the heap.
template <typename V>
class TidTable {
 public:
  using Entry = std::pair<uint32_t, V>;
  using iterator = typename std::vector<Entry>::iterator;

  iterator begin() { return v_.begin(); }
  iterator end() { return v_.end(); }
  size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  iterator find(uint32_t tid) {
    // Threads made one after another get consecutive ids: try tid's place in such a run first.
    if (!v_.empty() && tid >= v_.front().first) {
      size_t guess = tid - v_.front().first;
      if (guess < v_.size() && v_[guess].first == tid)
        return v_.begin() + static_cast<ptrdiff_t>(guess);
    }
    auto it = LowerBound(tid);
    return it != v_.end() && it->first == tid ? it : v_.end();
  }
  std::pair<iterator, bool> try_emplace(uint32_t tid) {
    auto it = LowerBound(tid);
    if (it != v_.end() && it->first == tid)
      return {it, false};
    return {v_.emplace(it, tid, V{}), true};
  }
  iterator erase(iterator it) { return v_.erase(it); }

 private:
  iterator LowerBound(uint32_t tid) {
    return std::lower_bound(v_.begin(), v_.end(), tid,
                            [](const Entry& e, uint32_t t) { return e.first < t; });
  }
  std::vector<Entry> v_;
};

// The sampling itself, without threads or a recorder (the benchmark and tests drive it directly).
class SamplerCore {
 public:
  struct Output {
    uint32_t pid = 0;
    uint32_t tid = 0;  // 0 with cpu >= 0: a CPU event
    int32_t cpu = -1;
    format::Event event;
    std::string name;  // not empty: a rename (exec, prctl) at event.ts, not an event to record
  };

  explicit SamplerCore(SamplerOptions options, uint64_t session_start_ns);
  void AddProcess(uint32_t pid);
  // One pass at now_ns (CLOCK_MONOTONIC or the session clock): appends its events to *out.
  void Sample(uint64_t now_ns, std::vector<Output>* out);
  size_t thread_count() const;
  // Thread intervals for which /proc was read, and those booked from the context-switch records
  // without reading /proc, over all passes so far.
  uint64_t reads() const { return reads_; }
  uint64_t assumed() const { return assumed_; }

 private:
  struct Thread {
    ProcFile schedstat, stat, syscall, status;
    bool syscall_readable = true;  // false: no ptrace access (Yama), the stat letter only
    std::string comm;              // its name in stat when last read
    ThreadAccount account;
    SwitchCounters switches;
    bool switches_known = false;
    char state = '?';
    uint64_t syscall_nr = kNoSyscall;
    int32_t cpu = -1;
    bool fresh = false;               // listed, not yet sampled
    uint32_t idle_passes = 0;         // reads in a row that found it had not run
    bool ran_since_discovery = true;  // may have started a process since we last looked
    uint32_t assumed_passes = 0;      // passes in a row booked without reading
    uint64_t read_pass = 0;           // the pass of its latest read
    bool read_live = false;           // ... and whether that pass had complete switch records
    // Booked from the context-switch records (see BookFromRecords) while `timed`: every record
    // of the thread since it became so has been collected, and its state then was known.
    bool timed = false;
    LastSwitch rec_state = LastSwitch::kUnknown;  // kIn, kPreempted or kBlocked since rec_since
    uint64_t rec_since = 0;
    uint64_t run_ns = 0, queue_ns = 0, blocked_ns = 0;  // this pass's, from the records
    bool switched = false;                              // records this pass
    bool active_since_read = false;  // ran or switched since its counters were last read
    bool blocked_anew = false;       // a block record since the wait was last read
    uint64_t wait_pass = 0;          // the pass the wait was last read
    uint32_t wait_every = 1;         // passes from that read to the next (after a block)
    bool wait_known = false;         // wait_state is what the thread was last seen blocked in
    ThreadState wait_state = ThreadState::kOtherWait;
    uint64_t wake_delay_ns = 0;  // run-queue delay after wake-ups not yet booked
    uint64_t born_pass = 0;      // the pass that first listed it or collected its FORK record
    bool woke = false;           // switched in after a block this pass (a wake-up delay to find)
    uint64_t exit_ns = 0;        // its EXIT record's time (timed threads): book up to it, drop it
    bool await_fork = false;     // listed before its FORK record came: wait a pass for it
    uint64_t timed_cpu_ns = 0;   // CPU time when timing began (0 from a FORK) plus running since
    // Reconciling the records' running time with the CPU counter (see SplitFromRecords): the
    // records' running since timing began, and that and the counter at the latest read.
    uint64_t rec_run_ns = 0, rec_run_at_read = 0, cpu_at_timing = 0;
    uint32_t pass_switches = 0;        // switch records this pass
    uint64_t switches_since_read = 0;  // ... and since the counters were last read
  };
  // The latest context-switch record of a thread, as far as the sampler has collected them.
  struct SwitchSeen {
    uint64_t ts = 0;
    LastSwitch last = LastSwitch::kUnknown;
    uint64_t pass = 0;  // the pass whose Collect brought a record of it last
  };
  struct Process {
    ProcFile stat;
    TidTable<Thread> threads;
    std::string task_dir;
    uint64_t listed = 0;       // entries of task_dir at the last listing
    bool lost_one = false;     // a known thread could not be read: list again
    bool forked = false;       // the switch records showed a thread created since the last listing
    uint64_t listed_pass = 0;  // the pass of the last listing
    uint64_t exited_cpu_seen = 0;  // CPU time of its ended threads, as far as we saw it
  };

  // --threads: whether tid is one of those to sample (every thread without the option).
  bool Wanted(uint32_t tid) const {
    return options_.only_tids.empty() || options_.only_tids.count(tid) != 0;
  }
  void SampleProcess(uint32_t pid, Process& p, uint64_t now_ns, std::vector<Output>* out);
  // Whether the thread's interval ending now can be booked without reading it, and as what.
  bool CanAssume(uint32_t tid, const Thread& t, ThreadState* state) const;
  // A collected record of a timed thread: books the time up to it and moves to its state.
  void Advance(Thread& t, uint64_t to_ns, LastSwitch next, uint32_t cpu);
  // A FORK record of a thread not yet known, in a pass with complete records: it is timed from
  // its creation (queued until its first switch-in), with no guess at when it started.
  void Born(uint32_t pid,
            Process& p,
            uint32_t tid,
            uint64_t ts,
            uint64_t now_ns,
            std::vector<Output>* out);
  // This pass's split of a timed thread from its records; *wake: the runnable part a reread found.
  // read: its counters were read this pass (then running booked ahead of them is taken back).
  StateSplit SplitFromRecords(Thread& t, bool read, uint64_t* wake);
  // The last interval of a timed thread whose EXIT record came: up to the exit, from the records.
  // Returns its CPU time at the exit.
  uint64_t BookExit(uint32_t pid,
                    uint32_t tid,
                    Thread& t,
                    uint64_t now_ns,
                    std::vector<Output>* out);
  // The interval of a timed thread from its records; false when the thread is gone.
  bool BookFromRecords(uint32_t pid,
                       uint32_t tid,
                       Thread& t,
                       uint64_t now_ns,
                       std::vector<Output>* out);
  // After a read in a pass with complete records: whether the thread's state is known, so its
  // next intervals can come from the records.
  void StartTiming(uint32_t tid, Thread& t, uint64_t now_ns);
  // Reads the system call (and if need be the state letter) of a blocked thread.
  bool ReadWait(uint32_t pid, uint32_t tid, Thread& t);
  // A thread not timed from the records: booked by CanAssume or read (SampleThread).
  bool SampleUntimed(uint32_t pid,
                     uint32_t tid,
                     Thread& t,
                     bool is_new,
                     uint64_t now_ns,
                     std::vector<Output>* out);
  bool SampleThread(uint32_t pid,
                    uint32_t tid,
                    Thread& t,
                    bool is_new,
                    uint64_t now_ns,
                    std::vector<Output>* out);
  void SampleCpus(uint64_t now_ns, std::vector<Output>* out);
  void DiscoverChildren();
  uint64_t StartTimeNs(uint64_t start_ticks) const;

  SamplerOptions options_;
  uint64_t session_start_ns_;
  int64_t boot_minus_now_ns_ = 0;  // CLOCK_BOOTTIME - the clock of now_ns
  std::map<uint32_t, Process> processes_;
  std::set<uint32_t> ended_;  // processes that ended (never re-added)
  ProcFile proc_stat_;
  std::vector<CpuTimes> cpu_prev_;
  uint64_t cpu_prev_ns_ = 0;
  uint64_t pass_ = 0;
  uint64_t prev_pass_ns_ = 0;
  uint64_t pass_mono_ns_ = 0;      // CLOCK_MONOTONIC when this pass began (how late a read comes)
  bool switches_live_ = false;     // this pass's switch records are complete
  uint64_t flowing_pass_ = 0;      // the first pass that collected a record: the events are enabled
  bool scan_children_ = true;      // children may have been created unseen since the last scan
  uint64_t last_unlive_pass_ = 0;  // the latest pass without complete switch records
  std::vector<SwitchChange> changes_;
  std::vector<SwitchChange> later_;  // collected records stamped after their pass: the next one's
  std::unordered_map<uint32_t, SwitchSeen> switches_;  // by tid
  uint64_t reads_ = 0;
  uint64_t assumed_ = 0;
};

class MonitorPublisher;

class ProcSampler : public recorder::RecorderSource {
 public:
  explicit ProcSampler(SamplerOptions options);
  ~ProcSampler() override;
  const char* name() const override { return "sampler"; }
  Status Start(recorder::SourceSink& recorder) override;
  void Poll(recorder::SourceSink& recorder, uint64_t now_ns) override;
  void Stop(recorder::SourceSink& recorder) override;
  void SetPeriod(uint64_t period_ns) override;

 private:
  void Loop();
  // One sampling pass: its events go to ready_ for the recorder's thread to deliver.
  void Pass();
  uint64_t SessionNow() const;  // the session clock, as the sampler reads it
  void Deliver(recorder::SourceSink& recorder);

  SamplerOptions options_;
  std::unique_ptr<SamplerCore> core_;
  // Publishes watched threads' figures into the segment after each pass (docs/selfmon.md).
  std::unique_ptr<MonitorPublisher> monitor_;
  TickConversion clock_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                       // guarded by mu_
  std::vector<SamplerCore::Output> ready_;  // guarded by mu_
  std::set<uint32_t> new_pids_;             // guarded by mu_
  std::set<uint32_t> known_pids_;           // recorder thread only
  std::atomic<uint64_t> passes_{0};
  std::atomic<uint64_t> overruns_{0};
  std::atomic<uint64_t> cpu_ns_{0};     // the sampler thread's own CPU time
  std::atomic<uint64_t> period_ns_{0};  // options_.period_ns, then `parmon ctl period`
};

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_SAMPLER_H_
