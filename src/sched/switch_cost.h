// What a context-switch record costs the thread that switches (issue 11, item 9): the kernel
// writes each PERF_RECORD_SWITCH into the session's buffer on the switching thread's own time, so
// a program that switches 25,000 times a second per thread pays it where no event count shows it.
//
// MeasureSwitchRecordCost times it on this machine, now: two threads of the caller hand a byte
// back and forth over pipes (every hand-off blocks one thread and wakes the other: four switch
// records per round trip), in alternating blocks with and without a switch recorder attached to
// them, and compares the two threads' own CPU time per round trip (CPU time, so time spent
// waiting for a CPU on a loaded machine is left out). The least-disturbed block of each kind is
// taken. The recorder reads the buffers between blocks, outside the timed part, as the recorder
// process does beside a real program.
#ifndef PARMON_SRC_SCHED_SWITCH_COST_H_
#define PARMON_SRC_SCHED_SWITCH_COST_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "base/status.h"

namespace parmon::sched {

// Two threads handing a byte back and forth over pipes (also sched_bench's ping-pong).
class PipePingPong {
 public:
  PipePingPong();
  ~PipePingPong();
  PipePingPong(const PipePingPong&) = delete;
  PipePingPong& operator=(const PipePingPong&) = delete;
  // One round trip: this thread writes, the peer answers.
  void Round();
  pid_t peer_tid() const { return tid_.load(); }
  // The peer's CPU time so far (its thread CPU clock).
  uint64_t PeerCpuNs() const;

 private:
  int ab_[2] = {-1, -1};
  int ba_[2] = {-1, -1};
  std::atomic<pid_t> tid_{0};
  std::thread peer_;
  bool ok_ = false;
};

struct SwitchRecordCost {
  double ns_per_record = 0;  // added CPU time per switch record, in the switching thread
  double records_per_round = 0;
  uint64_t cpu_ns = 0;  // CPU the measurement itself took (both threads)
};

// rounds per block, blocks of each kind. An error when perf_event_open refuses.
StatusOr<SwitchRecordCost> MeasureSwitchRecordCost(int rounds = 300, int blocks = 3);

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_SWITCH_COST_H_
