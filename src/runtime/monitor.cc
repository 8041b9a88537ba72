// libparmon: self-monitoring (parmon_monitor_* of parmon/parmon.h, docs/selfmon.md). A program
// claims entries of the segment's MonitorTable (shm_abi.h) for the threads it watches; the
// recorder's sampler publishes their figures after every pass under the table's sequence lock,
// and a read copies the watched entries (and the CPU table) under that lock and subtracts the
// previous read's copy. No system call, no lock, no allocation on a read.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <x86intrin.h>

#include <atomic>
#include <cstring>

#include "parmon/parmon.h"
#include "runtime/internal.h"
#include "runtime/shm_abi.h"

#define PARMON_EXPORT extern "C" __attribute__((visibility("default")))

namespace parmon::runtime {
namespace {

using shm::kMonitorCpus;
using shm::kMonitorEntries;
using shm::kMonitorStates;
using shm::MonitorEntry;
using shm::MonitorFigures;
using shm::MonitorTable;

// One entry's figures as copied by a read.
struct Snap {
  uint32_t generation;
  uint32_t flags;
  int32_t last_cpu;
  uint32_t threads;
  uint64_t first_ns, last_ns;
  uint64_t states_ns[kMonitorStates];
  uint64_t cpu_ns;
  uint64_t last_begin_ns;
  uint64_t last_states_ns[kMonitorStates];
  uint64_t last_cpu_ns;
};

struct CpuSnap {
  uint64_t busy_ns, total_ns, last_busy_ns, last_total_ns;
};

}  // namespace
}  // namespace parmon::runtime

// The handle: mapped, not allocated (libparmon has no allocator of its own), ~110 KB.
struct parmon_monitor {
  parmon::shm::MonitorTable* table;
  int count;
  uint32_t entry[parmon::shm::kMonitorEntries];       // table index of each watched thread
  uint32_t generation[parmon::shm::kMonitorEntries];  // of our claim
  int32_t tid[parmon::shm::kMonitorEntries];
  parmon::runtime::Snap prev[parmon::shm::kMonitorEntries];  // the previous read's copy
  parmon::runtime::Snap cur[parmon::shm::kMonitorEntries];
  uint32_t cpu_count;  // of prev_cpu / cur_cpu
  bool have_prev_cpu;  // prev_cpu holds a previous read's copy
  parmon::runtime::CpuSnap prev_cpu[parmon::shm::kMonitorCpus];
  parmon::runtime::CpuSnap cur_cpu[parmon::shm::kMonitorCpus];
};

namespace parmon::runtime {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

void Copy(const MonitorFigures& f, Snap* s) {
  s->generation = f.generation.load(kRelaxed);
  s->flags = f.flags.load(kRelaxed);
  s->last_cpu = f.last_cpu.load(kRelaxed);
  s->threads = f.threads.load(kRelaxed);
  s->first_ns = f.first_ns.load(kRelaxed);
  s->last_ns = f.last_ns.load(kRelaxed);
  for (int i = 0; i < kMonitorStates; ++i)
    s->states_ns[i] = f.states_ns[i].load(kRelaxed);
  s->cpu_ns = f.cpu_ns.load(kRelaxed);
  s->last_begin_ns = f.last_begin_ns.load(kRelaxed);
  for (int i = 0; i < kMonitorStates; ++i)
    s->last_states_ns[i] = f.last_states_ns[i].load(kRelaxed);
  s->last_cpu_ns = f.last_cpu_ns.load(kRelaxed);
}

// Copies the watched entries and the CPU table as of one published pass (the sequence lock).
void Snapshot(parmon_monitor* m) {
  MonitorTable* t = m->table;
  for (;;) {
    const uint64_t s = t->seq.load(std::memory_order_acquire);
    if (s & 1) {
      _mm_pause();  // the sampler thread is publishing: a few microseconds at most
      continue;
    }
    for (int i = 0; i < m->count; ++i)
      Copy(t->entries[m->entry[i]].figures, &m->cur[i]);
    uint32_t ncpu = t->cpu_count.load(kRelaxed);
    if (ncpu > kMonitorCpus)
      ncpu = kMonitorCpus;
    for (uint32_t c = 0; c < ncpu; ++c) {
      const shm::MonitorCpu& src = t->cpus[c];
      m->cur_cpu[c] = {src.busy_ns.load(kRelaxed), src.total_ns.load(kRelaxed),
                       src.last_busy_ns.load(kRelaxed), src.last_total_ns.load(kRelaxed)};
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (t->seq.load(kRelaxed) == s) {
      m->cpu_count = ncpu;
      return;
    }
  }
}

double Fraction(uint64_t part, uint64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : -1.0;
}

}  // namespace
}  // namespace parmon::runtime

using namespace parmon::runtime;  // NOLINT: the C ABI below is this file's interface

PARMON_EXPORT int32_t parmon_thread_id(void) {
  return static_cast<int32_t>(syscall(SYS_gettid));
}

PARMON_EXPORT int parmon_monitor_open(parmon_monitor** monitor) {
  if (monitor == nullptr)
    return PARMON_E_INVALID;
  *monitor = nullptr;
  parmon::shm::SegmentHeader* seg = CurrentSegment();
  if (seg == nullptr)
    return PARMON_E_NOT_RECORDED;
  void* p = mmap(nullptr, sizeof(parmon_monitor), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return PARMON_E_FULL;
  auto* m = static_cast<parmon_monitor*>(p);  // zero pages: count 0, no previous copy
  m->table = parmon::shm::Monitor(seg);
  *monitor = m;
  return PARMON_OK;
}

PARMON_EXPORT int parmon_monitor_watch(parmon_monitor* m, int32_t tid, int* index) {
  if (m == nullptr || tid < PARMON_PROCESS)
    return PARMON_E_INVALID;
  if (m->count >= static_cast<int>(kMonitorEntries))
    return PARMON_E_FULL;
  if (tid == PARMON_SELF)
    tid = parmon_thread_id();
  const uint32_t watched_tid = tid == PARMON_PROCESS ? 0 : static_cast<uint32_t>(tid);
  MonitorTable* t = m->table;
  const uint32_t n = t->entry_count < kMonitorEntries ? t->entry_count : kMonitorEntries;
  for (uint32_t i = 0; i < n; ++i) {
    MonitorEntry& e = t->entries[i];
    uint32_t expected = parmon::shm::kMonitorFree;
    if (e.state.load(kRelaxed) != expected ||
        !e.state.compare_exchange_strong(expected, parmon::shm::kMonitorClaiming,
                                         std::memory_order_acquire))
      continue;
    e.pid = static_cast<uint32_t>(getpid());
    e.tid = watched_tid;
    e.generation = e.generation + 1 == 0 ? 1 : e.generation + 1;
    const int k = m->count;
    m->entry[k] = i;
    m->generation[k] = e.generation;
    m->tid[k] = static_cast<int32_t>(watched_tid);
    std::memset(&m->prev[k], 0, sizeof m->prev[k]);
    // Release: the sampler that sees Watched (acquire) sees pid, tid and generation.
    e.state.store(parmon::shm::kMonitorWatched, std::memory_order_release);
    m->count = k + 1;
    if (index != nullptr)
      *index = k;
    return PARMON_OK;
  }
  return PARMON_E_FULL;
}

PARMON_EXPORT int parmon_monitor_read(parmon_monitor* m,
                                      int what,
                                      parmon_thread_figures* out,
                                      int n) {
  if (m == nullptr || (out == nullptr && n > 0) || n < 0 ||
      (what != PARMON_SINCE_LAST_READ && what != PARMON_LAST_INTERVAL))
    return -PARMON_E_INVALID;
  Snapshot(m);
  const bool since = what == PARMON_SINCE_LAST_READ;
  const int count = n < m->count ? n : m->count;
  for (int i = 0; i < count; ++i) {
    const Snap& c = m->cur[i];
    const Snap& p = m->prev[i];
    parmon_thread_figures& f = out[i];
    std::memset(&f, 0, sizeof f);
    f.tid = m->tid[i];
    f.cpu = -1;
    f.cpu_busy = -1.0;
    if (c.generation != m->generation[i] || c.last_ns == 0) {
      f.flags = PARMON_FIGURES_NONE;  // the sampler has not booked it since it was watched
      continue;
    }
    f.cpu = c.last_cpu;
    f.threads = c.threads;
    f.flags = (c.flags & parmon::shm::kMonitorExited) ? PARMON_FIGURES_EXITED : 0;
    uint64_t running = 0;
    if (since) {
      const bool had = p.generation == c.generation && p.last_ns != 0;
      f.start_ns = had ? p.last_ns : c.first_ns;
      f.end_ns = c.last_ns;
      for (int s = 0; s < PARMON_STATE_COUNT; ++s)
        f.states_ns[s] = c.states_ns[s] - (had ? p.states_ns[s] : 0);
      f.cpu_ns = c.cpu_ns - (had ? p.cpu_ns : 0);
    } else {
      f.start_ns = c.last_begin_ns;
      f.end_ns = c.last_ns;
      for (int s = 0; s < PARMON_STATE_COUNT; ++s)
        f.states_ns[s] = c.last_states_ns[s];
      f.cpu_ns = c.last_cpu_ns;
    }
    running = f.states_ns[PARMON_STATE_RUNNING];
    f.elapsed_ns = f.end_ns > f.start_ns ? f.end_ns - f.start_ns : 0;
    if (f.elapsed_ns == 0)
      f.flags |= PARMON_FIGURES_NONE;  // no pass booked it since the previous read
    f.utilisation = f.elapsed_ns > 0 ? Fraction(running, f.elapsed_ns) : 0.0;
    if (c.last_cpu >= 0 && static_cast<uint32_t>(c.last_cpu) < m->cpu_count) {
      const CpuSnap& cc = m->cur_cpu[c.last_cpu];
      const CpuSnap& pc = m->prev_cpu[c.last_cpu];
      if (since && m->have_prev_cpu && cc.total_ns > pc.total_ns)
        f.cpu_busy = Fraction(cc.busy_ns - pc.busy_ns, cc.total_ns - pc.total_ns);
      else
        f.cpu_busy = Fraction(cc.last_busy_ns, cc.last_total_ns);
    }
  }
  if (since) {
    // The next read subtracts this one's copy (of every watched thread, not only those given).
    std::memcpy(m->prev, m->cur, sizeof(Snap) * static_cast<size_t>(m->count));
    std::memcpy(m->prev_cpu, m->cur_cpu, sizeof(CpuSnap) * m->cpu_count);
    m->have_prev_cpu = m->cpu_count > 0;
  }
  return count;
}

PARMON_EXPORT void parmon_monitor_close(parmon_monitor* m) {
  if (m == nullptr)
    return;
  for (int i = 0; i < m->count; ++i)
    m->table->entries[m->entry[i]].state.store(parmon::shm::kMonitorFree,
                                               std::memory_order_release);
  munmap(m, sizeof(parmon_monitor));
}
