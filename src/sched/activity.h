// What the context-switch recorder tells the /proc sampler: which threads were switched in or out
// since the sampler last asked, and how each one's latest switch went.
//
// Why: a thread with no switch record over an interval spent all of it in the state it was in at
// the start (on a CPU, queued after a preemption, or blocked in the same call), so the sampler
// can book that interval without reading the thread's /proc files. Reading them is the sampler's
// whole cost; most threads of a program are idle or running steadily in any one 10 ms period.
//
// Threads: the sampler calls Collect on its own thread; it reads the kernel's buffers itself
// (under mu_, which the recorder's thread also takes to read them), so the answer covers every
// record written before the call and not only those the recorder's loop happened to drain.
#ifndef PARMON_SRC_SCHED_ACTIVITY_H_
#define PARMON_SRC_SCHED_ACTIVITY_H_

#include <cstdint>
#include <mutex>
#include <vector>

namespace parmon::sched {

class SwitchRecorder;

enum class LastSwitch : uint8_t {
  kUnknown = 0,  // created, or nothing seen since records were lost
  kIn,           // switched in: on a CPU until its next record
  kPreempted,    // switched out while runnable: queued until its next record
  kBlocked,      // switched out to sleep: blocked until its next record
  kGone,         // exited
};

struct SwitchChange {
  uint64_t ts = 0;
  uint32_t pid = 0, tid = 0;
  uint32_t cpu = 0;  // where it was switched (a switch record's CPU)
  LastSwitch last = LastSwitch::kUnknown;
};

class SwitchActivity {
 public:
  // Sampler thread. Reads the kernel's buffers and appends to *changes, in time order, the
  // records of threads since the previous call (a record may come one call late: another CPU's
  // buffer can lag by microseconds, so compare ts before taking it as the latest). False when the
  // answer cannot be trusted: no records (never opened, refused, recorder gone) or records were
  // lost since the previous call, or the budget stopped them (for good); then every thread must
  // be read.
  bool Collect(std::vector<SwitchChange>* changes);

 private:
  friend class SwitchRecorder;

  std::mutex mu_;                       // also guards the recorder's buffers and pending records
  SwitchRecorder* recorder_ = nullptr;  // guarded by mu_
  std::vector<SwitchChange> changes_;   // guarded by mu_
  std::vector<size_t> run_ends_;        // guarded by mu_: changes_ is sorted within each run
  bool lost_ = false;                   // guarded by mu_
  bool stopped_ = false;                // guarded by mu_: the budget stopped the records
};

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_ACTIVITY_H_
