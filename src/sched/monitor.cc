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

struct MonitorPublisher::Figures {
  bool booked = false;
  uint64_t begin = 0, end = 0;
  uint64_t states[shm::kMonitorStates] = {};
  uint32_t threads = 0;
  int32_t cpu = -1;
  bool exited = false;
};

struct MonitorPublisher::Pass {
  // The watched entries, by (pid, tid); tid 0 stands for every thread of pid.
  std::unordered_map<uint64_t, std::vector<uint32_t>> watched;
  std::vector<uint32_t> entries;
  std::vector<uint32_t> claim = std::vector<uint32_t>(shm::kMonitorEntries, 0);
  std::vector<Figures> figures;  // per entry, when any entry is watched
  // The MPI time of the watched processes' threads so far (ticks), from their ring controls.
  std::unordered_map<uint64_t, uint64_t> mpi_now;

  // Calls fn(figures, is_the_thread_itself) for each entry watching (pid, tid).
  template <typename Fn>
  void Each(uint32_t pid, uint32_t tid, Fn&& fn) {
    if (auto it = watched.find(uint64_t{pid} << 32 | tid); it != watched.end())
      for (uint32_t i : it->second)
        fn(figures[i], true);
    if (auto it = watched.find(uint64_t{pid} << 32); it != watched.end())
      for (uint32_t i : it->second)
        fn(figures[i], false);
  }
};

void MonitorPublisher::Publish(const std::vector<SamplerCore::Output>& out,
                               uint64_t now_ns,
                               uint64_t period_ns) {
  static_assert(format::kThreadStateCount == 8 && shm::kMonitorStates == 7);
  Pass p;
  ScanEntries(p);
  // Only a session with watched threads pays for more than the scan above.
  if (!p.entries.empty()) {
    p.figures.resize(shm::kMonitorEntries);
    ReadMpiTimes(p);
    Book(out, p);
  }
  // Publish under the sequence lock (shm_abi.h): readers retry while seq is odd.
  shm::MonitorTable* t = table_;
  const uint64_t seq = t->seq.load(kRelaxed);
  t->seq.store(seq + 1, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (uint32_t i : p.entries)
    WriteEntry(i, p.claim[i], p.figures[i]);
  WriteCpus(out);
  t->pass_ns.store(now_ns, kRelaxed);
  t->period_ns.store(period_ns, kRelaxed);
  t->passes.store(t->passes.load(kRelaxed) + 1, kRelaxed);
  t->seq.store(seq + 2, std::memory_order_release);
}

void MonitorPublisher::ScanEntries(Pass& p) {
  const bool sweep = ++publishes_ % 128 == 0;
  for (uint32_t i = 0; i < shm::kMonitorEntries; ++i) {
    shm::MonitorEntry& e = table_->entries[i];
    if (e.state.load(std::memory_order_acquire) != shm::kMonitorWatched)
      continue;
    if (sweep && kill(static_cast<pid_t>(e.pid), 0) != 0 && errno == ESRCH) {
      // Its process is gone without closing the monitor: the entry is free again.
      uint32_t expected = shm::kMonitorWatched;
      e.state.compare_exchange_strong(expected, shm::kMonitorFree, kRelaxed);
      continue;
    }
    p.claim[i] = e.generation;
    p.entries.push_back(i);
    p.watched[uint64_t{e.pid} << 32 | e.tid].push_back(i);
  }
}

void MonitorPublisher::ReadMpiTimes(Pass& p) const {
  if (segment_ == nullptr)
    return;
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
        p.watched.count(uint64_t{r.pid} << 32) + p.watched.count(uint64_t{r.pid} << 32 | r.tid) > 0)
      p.mpi_now[uint64_t{r.pid} << 32 | r.tid] = shm::MpiTicksAt(word, now_ticks);
  }
}

// The MPI time of (pid, tid) since the previous pass, in ns (0 on its first pass: a baseline).
uint64_t MonitorPublisher::MpiSince(const Pass& p, uint32_t pid, uint32_t tid) {
  const uint64_t key = uint64_t{pid} << 32 | tid;
  auto it = p.mpi_now.find(key);
  if (it == p.mpi_now.end())
    return 0;
  auto [seen, added] = mpi_seen_.try_emplace(key, it->second);
  const uint64_t ticks = added || it->second < seen->second ? 0 : it->second - seen->second;
  seen->second = it->second;
  return clock_.ToNs(ticks) - clock_.ToNs(0);
}

void MonitorPublisher::Book(const std::vector<SamplerCore::Output>& out, Pass& p) {
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
        if (const uint64_t mpi = MpiSince(p, o.pid, o.tid); mpi > 0)
          states[static_cast<int>(format::ThreadState::kCommWait)] +=
              format::TakeMpiTime(states, format::kThreadStateCount, mpi, nullptr);
        const uint64_t begin = e.ts > total ? e.ts - total : 0;
        p.Each(o.pid, o.tid, [&](Figures& f, bool) {
          f.begin = f.booked ? std::min(f.begin, begin) : begin;
          f.end = std::max(f.end, e.ts);
          f.booked = true;
          ++f.threads;
          for (int s = 0; s < format::kThreadStateCount; ++s)
            f.states[ReportState(s)] += states[s];
        });
        break;
      }
      case format::Kind::kThreadSample:
        p.Each(o.pid, o.tid, [&](Figures& f, bool) { f.cpu = static_cast<int32_t>(e.args[1]); });
        break;
      case format::Kind::kTaskExit:
        mpi_seen_.erase(uint64_t{o.pid} << 32 | o.tid);
        p.Each(o.pid, o.tid, [&](Figures& f, bool thread) { f.exited = f.exited || thread; });
        break;
      default:
        break;
    }
  }
}

// Entry i's figures after this pass; `claim` is the generation its watcher claimed it under.
void MonitorPublisher::WriteEntry(uint32_t i, uint32_t claim, const Figures& p) {
  shm::MonitorFigures& f = table_->entries[i].figures;
  if (generation_[i] != claim) {
    // A new claim: its figures start from zero.
    generation_[i] = claim;
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
    f.generation.store(claim, kRelaxed);
  }
  if (p.cpu >= 0)
    f.last_cpu.store(p.cpu, kRelaxed);
  if (p.exited)
    f.flags.store(f.flags.load(kRelaxed) | shm::kMonitorExited, kRelaxed);
  if (!p.booked)
    return;
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

void MonitorPublisher::WriteCpus(const std::vector<SamplerCore::Output>& out) {
  shm::MonitorTable* t = table_;
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
}

}  // namespace parmon::sched
