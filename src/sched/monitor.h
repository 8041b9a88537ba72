// The recorder's side of self-monitoring (docs/selfmon.md): after every sampler pass, the figures
// of the threads the program watches (entries of the segment's shm::MonitorTable) are published
// from that pass's own output -- the ThreadStates, ThreadSample, TaskExit and CpuSample events the
// trace gets -- so a program reads exactly what `parmon report` will sum. Runs on the sampler's
// thread, the table's only writer of figures.
#ifndef PARMON_SRC_SCHED_MONITOR_H_
#define PARMON_SRC_SCHED_MONITOR_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/clock.h"

#include "runtime/shm_abi.h"
#include "sched/sampler.h"

namespace parmon::sched {

// A watched thread's time inside MPI calls (shm::RingControl::mpi_ticks, kept by libparmon_mpi)
// is taken out of its states into communication each pass, as the report does (format::
// TakeMpiTime), so an MPI rank reads the split its report shows, however its MPI library waited.
class MonitorPublisher {
 public:
  // `segment` (may be null: no MPI time) holds the ring controls; `clock` converts their ticks.
  explicit MonitorPublisher(shm::MonitorTable* table,
                            const shm::SegmentHeader* segment = nullptr,
                            TickConversion clock = {});
  // One pass's output at now_ns (session ns), the sampler's period then.
  void Publish(const std::vector<SamplerCore::Output>& out, uint64_t now_ns, uint64_t period_ns);

 private:
  struct Figures;  // what one pass booked for one watched entry (monitor.cc)
  struct Pass;     // one pass's watched entries and their Figures
  void ScanEntries(Pass& p);
  void ReadMpiTimes(Pass& p) const;
  uint64_t MpiSince(const Pass& p, uint32_t pid, uint32_t tid);
  void Book(const std::vector<SamplerCore::Output>& out, Pass& p);
  void WriteEntry(uint32_t i, uint32_t claim, const Figures& f);
  void WriteCpus(const std::vector<SamplerCore::Output>& out);

  shm::MonitorTable* table_;
  const shm::SegmentHeader* segment_;
  TickConversion clock_;
  std::vector<uint32_t> generation_;  // per entry: the claim its figures belong to
  uint64_t publishes_ = 0;
  // Per watched thread (pid << 32 | tid): its MPI ticks at the previous pass.
  std::unordered_map<uint64_t, uint64_t> mpi_seen_;
};

}  // namespace parmon::sched

#endif  // PARMON_SRC_SCHED_MONITOR_H_
