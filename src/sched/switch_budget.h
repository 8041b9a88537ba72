// The overhead budget of context-switch records in trace mode (issue 11): the kernel writes each
// PERF_RECORD_SWITCH on the switching thread's own time (~450 ns on the development VM), so a
// program that switches very often (4 MPI ranks polling on 2 CPUs: ~16 switches per barrier) pays
// a large share of its CPU for them. As perf lowers its sample rate when sampling costs too much,
// the recorder stops the records when, over a window, they would cost more than the budget.
//
// SwitchBudget is the arithmetic, fed the records in time order (the switch recorder's Handle):
// per window of window_ns of record time it counts the records and the program's CPU time in the
// window, from the records themselves (each thread's switch-in to its switch-out; a thread on a
// CPU through the window without a record counts all of it), but at least the window's length.
// The records cost records x cost_ns of it; past budget x that the window is over the budget.
//
// Why its CPU time: the records are written on the program's threads' CPU time, and the share of
// it they take is what a busy program loses (4 ranks on 2 CPUs, the barrier loop: ~45% of the two
// CPUs, and it ran +52% slower with them; when other work takes half the CPUs, the program's share
// doubles, and so does what the records cost it). Why at least the window: a program that mostly
// sleeps and wakes 1,000 times a second for 10 us of work would spend ~9% of its CPU time on its
// records, yet they slow it by ~0.1% (each wake-up takes a microsecond longer): against its
// elapsed time, one CPU's worth of the window, that is what they cost.
//
// Not thread-safe: the switch recorder calls it on the recorder's thread.
#ifndef PARMON_SRC_SCHED_SWITCH_BUDGET_H_
#define PARMON_SRC_SCHED_SWITCH_BUDGET_H_

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace parmon::sched {

struct SwitchBudgetOptions {
  double share = 0.05;  // of the program's CPU time; 0 = no budget (never over)
  double cost_ns = 0;   // the cost of one record in the switching thread
  uint64_t window_ns = 200'000'000;
};

// One window's figures.
struct BudgetWindow {
  uint64_t begin_ns = 0, length_ns = 0;
  uint64_t records = 0;
  uint64_t cpu_ns = 0;  // the program's CPU time in it, at least length_ns
  double share = 0;     // records x cost / cpu_ns
};

class SwitchBudget {
 public:
  explicit SwitchBudget(SwitchBudgetOptions options) : options_(options) {}
  // A switch record of thread tid at ts (in time order): switched out (out) or in.
  void Switch(uint64_t ts, uint32_t tid, bool out);
  // Thread tid ended at ts (its EXIT record): off a CPU for good.
  void Exit(uint64_t ts, uint32_t tid);
  // Whether a window went over the budget (then `over()` is that window); stays true.
  bool exceeded() const { return exceeded_; }
  const BudgetWindow& over() const { return over_; }
  // Windows closed so far, and the largest share seen in one of them.
  uint64_t windows() const { return windows_; }
  double max_share() const { return max_share_; }

 private:
  struct Track {
    bool on_cpu = false;
    uint64_t in_ts = 0;  // its latest switch-in, while on_cpu
  };
  // Closes windows up to ts, so that ts falls in the current one.
  void Advance(uint64_t ts);
  void Close(uint64_t end_ns);
  // CPU time of a thread on a CPU since in_ts, up to ts, inside the current window.
  uint64_t RanUntil(uint64_t in_ts, uint64_t ts) const {
    const uint64_t from = std::max(in_ts, begin_);
    return ts > from ? ts - from : 0;
  }

  SwitchBudgetOptions options_;
  std::unordered_map<uint32_t, Track> tracks_;
  uint64_t begin_ = 0;  // the current window's start (0: no record yet)
  uint64_t records_ = 0;
  uint64_t cpu_ns_ = 0;  // the program's CPU time in the current window so far
  uint64_t windows_ = 0;
  double max_share_ = 0;
  bool exceeded_ = false;
  BudgetWindow over_;
};

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_SWITCH_BUDGET_H_
