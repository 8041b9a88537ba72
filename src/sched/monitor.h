// The recorder's side of self-monitoring (docs/selfmon.md): after every sampler pass, the figures
// of the threads the program watches (entries of the segment's shm::MonitorTable) are published
// from that pass's own output -- the ThreadStates, ThreadSample, TaskExit and CpuSample events the
// trace gets -- so a program reads exactly what `parmon report` will sum. Runs on the sampler's
// thread, the table's only writer of figures.
#ifndef PARMON_SRC_SCHED_MONITOR_H_
#define PARMON_SRC_SCHED_MONITOR_H_

#include <cstdint>
#include <vector>

#include "runtime/shm_abi.h"
#include "sched/sampler.h"

namespace parmon::sched {

class MonitorPublisher {
 public:
  explicit MonitorPublisher(shm::MonitorTable* table);
  // One pass's output at now_ns (session ns), the sampler's period then.
  void Publish(const std::vector<SamplerCore::Output>& out, uint64_t now_ns, uint64_t period_ns);

 private:
  shm::MonitorTable* table_;
  std::vector<uint32_t> generation_;  // per entry: the claim its figures belong to
  uint64_t publishes_ = 0;
};

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_MONITOR_H_
