#include "sched/monitor.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <unordered_map>

#include "format/kinds.h"
#include "format/thread_state.h"

namespace parmon::sched {

namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

// What one pass booked for one watched entry.
struct PassFigures {
  bool booked = false;
  uint64_t begin = 0, end = 0;
  uint64_t states[shm::kMonitorStates] = {};
  uint32_t threads = 0;
  int32_t cpu = -1;
  bool exited = false;
};

void Add(std::atomic<uint64_t>& a, uint64_t v) {
  a.store(a.load(kRelaxed) + v, kRelaxed);  // one writer: no read-modify-write needed
}

// A ThreadStates arg's state as reports show it: stopped and other waits are "other".
int ReportState(int arg) {
  return arg < shm::kMonitorStates - 1 ? arg : shm::kMonitorStates - 1;
}

}  // namespace

MonitorPublisher::MonitorPublisher(shm::MonitorTable* table,
                                   const shm::SegmentHeader* segment,
                                   TickConversion clock)
    : table_(table), segment_(segment), clock_(clock), generation_(shm::kMonitorEntries, 0) {}

void MonitorPublisher::Publish(const std::vector<SamplerCore::Output>& out,
                               uint64_t now_ns,
                               uint64_t period_ns) {
  static_assert(format::kThreadStateCount == 8 && shm::kMonitorStates == 7);
  shm::MonitorTable* t = table_;
  // The watched entries, by (pid, tid); tid 0 stands for every thread of pid.
  std::unordered_map<uint64_t, std::vector<uint32_t>> watched;
  std::vector<uint32_t> entries;
  std::vector<uint32_t> claim(shm::kMonitorEntries, 0);
  const bool sweep = ++publishes_ % 128 == 0;
  for (uint32_t i = 0; i < shm::kMonitorEntries; ++i) {
    shm::MonitorEntry& e = t->entries[i];
    if (e.state.load(std::memory_order_acquire) != shm::kMonitorWatched)
      continue;
    if (sweep && kill(static_cast<pid_t>(e.pid), 0) != 0 && errno == ESRCH) {
      // Its process is gone without closing the monitor: the entry is free again.
      uint32_t expected = shm::kMonitorWatched;
      e.state.compare_exchange_strong(expected, shm::kMonitorFree, kRelaxed);
      continue;
    }
    claim[i] = e.generation;
    entries.push_back(i);
    watched[uint64_t{e.pid} << 32 | e.tid].push_back(i);
  }
  // Only a session with watched threads pays for more than the scan above.
  std::vector<PassFigures> pass(entries.empty() ? 0 : shm::kMonitorEntries);
  auto each = [&](uint32_t pid, uint32_t tid, auto&& fn) {
    if (auto it = watched.find(uint64_t{pid} << 32 | tid); it != watched.end())
      for (uint32_t i : it->second)
        fn(pass[i], true);
    if (auto it = watched.find(uint64_t{pid} << 32); it != watched.end())
      for (uint32_t i : it->second)
        fn(pass[i], false);
  };
  // The MPI time of the watched processes' threads so far (ticks), from their ring controls.
  std::unordered_map<uint64_t, uint64_t> mpi_now;
  if (!entries.empty() && segment_ != nullptr) {
    const uint64_t now_ticks = segment_->ticks_are_tsc ? ReadTsc() : MonotonicNs();
    const shm::RingControl* rings =
        shm::Rings(const_cast<shm::SegmentHeader*>(segment_));  // read only
    for (uint32_t i = 0; i < segment_->ring_count; ++i) {
      const shm::RingControl& r = rings[i];
      const uint32_t state = r.state.load(std::memory_order_acquire);
      if (state != shm::kClaimed && state != shm::kRetired)
        continue;
      const uint64_t word = r.mpi_ticks.load(kRelaxed);
      if (word != 0 &&
          watched.count(uint64_t{r.pid} << 32) + watched.count(uint64_t{r.pid} << 32 | r.tid) > 0)
        mpi_now[uint64_t{r.pid} << 32 | r.tid] = shm::MpiTicksAt(word, now_ticks);
    }
  }
  // The MPI time of (pid, tid) since the previous pass, in ns (0 on its first pass: a baseline).
  auto mpi_since = [&](uint32_t pid, uint32_t tid) -> uint64_t {
    const uint64_t key = uint64_t{pid} << 32 | tid;
    auto it = mpi_now.find(key);
    if (it == mpi_now.end())
      return 0;
    auto [seen, added] = mpi_seen_.try_emplace(key, it->second);
    const uint64_t ticks = added || it->second < seen->second ? 0 : it->second - seen->second;
    seen->second = it->second;
    return clock_.ToNs(ticks) - clock_.ToNs(0);
  };
  if (!entries.empty()) {
    for (const SamplerCore::Output& o : out) {
      if (o.tid == 0 || !o.name.empty())
        continue;
      const format::Event& e = o.event;
      switch (static_cast<format::Kind>(e.kind)) {
        case format::Kind::kThreadStates: {
          uint64_t total = 0;
          uint64_t states[format::kThreadStateCount];
          for (int s = 0; s < format::kThreadStateCount; ++s)
            total += states[s] = e.args[s];
          // Time in MPI calls is communication, however the MPI library waited (as reported).
          if (const uint64_t mpi = mpi_since(o.pid, o.tid); mpi > 0)
            states[static_cast<int>(format::ThreadState::kCommWait)] +=
                format::TakeMpiTime(states, format::kThreadStateCount, mpi, nullptr);
          const uint64_t begin = e.ts > total ? e.ts - total : 0;
          each(o.pid, o.tid, [&](PassFigures& p, bool) {
            p.begin = p.booked ? std::min(p.begin, begin) : begin;
            p.end = std::max(p.end, e.ts);
            p.booked = true;
            ++p.threads;
            for (int s = 0; s < format::kThreadStateCount; ++s)
              p.states[ReportState(s)] += states[s];
          });
          break;
        }
        case format::Kind::kThreadSample:
          each(o.pid, o.tid,
               [&](PassFigures& p, bool) { p.cpu = static_cast<int32_t>(e.args[1]); });
          break;
        case format::Kind::kTaskExit:
          mpi_seen_.erase(uint64_t{o.pid} << 32 | o.tid);
          each(o.pid, o.tid, [&](PassFigures& p, bool thread) { p.exited = p.exited || thread; });
          break;
        default:
          break;
      }
    }
  }
  // Publish under the sequence lock (shm_abi.h): readers retry while seq is odd.
  const uint64_t seq = t->seq.load(kRelaxed);
  t->seq.store(seq + 1, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (uint32_t i : entries) {
    shm::MonitorFigures& f = t->entries[i].figures;
    if (generation_[i] != claim[i]) {
      // A new claim: its figures start from zero.
      generation_[i] = claim[i];
      f.flags.store(0, kRelaxed);
      f.last_cpu.store(-1, kRelaxed);
      f.threads.store(0, kRelaxed);
      f.first_ns.store(0, kRelaxed);
      f.last_ns.store(0, kRelaxed);
      for (int s = 0; s < shm::kMonitorStates; ++s) {
        f.states_ns[s].store(0, kRelaxed);
        f.last_states_ns[s].store(0, kRelaxed);
      }
      f.cpu_ns.store(0, kRelaxed);
      f.last_begin_ns.store(0, kRelaxed);
      f.last_cpu_ns.store(0, kRelaxed);
      f.generation.store(claim[i], kRelaxed);
    }
    const PassFigures& p = pass[i];
    if (p.cpu >= 0)
      f.last_cpu.store(p.cpu, kRelaxed);
    if (p.exited)
      f.flags.store(f.flags.load(kRelaxed) | shm::kMonitorExited, kRelaxed);
    if (!p.booked)
      continue;
    if (f.first_ns.load(kRelaxed) == 0)
      f.first_ns.store(std::max<uint64_t>(p.begin, 1), kRelaxed);
    f.last_ns.store(std::max(f.last_ns.load(kRelaxed), p.end), kRelaxed);
    f.threads.store(p.threads, kRelaxed);
    for (int s = 0; s < shm::kMonitorStates; ++s) {
      Add(f.states_ns[s], p.states[s]);
      f.last_states_ns[s].store(p.states[s], kRelaxed);
    }
    // CPU time: the running the sampler booked, which it reconciles with the thread's CPU clock.
    Add(f.cpu_ns, p.states[0]);
    f.last_begin_ns.store(p.begin, kRelaxed);
    f.last_cpu_ns.store(p.states[0], kRelaxed);
  }
  uint32_t cpus = t->cpu_count.load(kRelaxed);
  for (const SamplerCore::Output& o : out) {
    if (o.tid != 0 || o.cpu < 0 || static_cast<uint32_t>(o.cpu) >= shm::kMonitorCpus ||
        o.event.kind != static_cast<uint16_t>(format::Kind::kCpuSample))
      continue;
    const auto& a = o.event.args;
    const uint64_t total = a[0] + a[1] + a[2] + a[3];
    shm::MonitorCpu& c = t->cpus[o.cpu];
    Add(c.busy_ns, a[0]);
    Add(c.total_ns, total);
    c.last_busy_ns.store(a[0], kRelaxed);
    c.last_total_ns.store(total, kRelaxed);
    cpus = std::max(cpus, static_cast<uint32_t>(o.cpu) + 1);
  }
  t->cpu_count.store(cpus, kRelaxed);
  t->pass_ns.store(now_ns, kRelaxed);
  t->period_ns.store(period_ns, kRelaxed);
  t->passes.store(t->passes.load(kRelaxed) + 1, kRelaxed);
  t->seq.store(seq + 2, std::memory_order_release);
}

}  // namespace parmon::sched
