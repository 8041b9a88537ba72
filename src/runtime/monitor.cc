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

// One entry's cumulative figures as the previous PARMON_SINCE_LAST_READ copied them (72 bytes:
// a read of 64 threads keeps its working set in L1).
struct Snap {
  uint32_t generation;
  uint64_t last_ns;
  uint64_t states_ns[kMonitorStates];
};

struct CpuSnap {
  uint64_t busy_ns, total_ns, last_busy_ns, last_total_ns;
};

}  // namespace
}  // namespace parmon::runtime

// The handle: mapped, not allocated (libparmon has no allocator of its own), ~110 KB. Two copies
// of the figures: the previous PARMON_SINCE_LAST_READ's (snaps[prev]) and the one being read;
// a read since the last one flips them instead of copying.
struct parmon_monitor {
  parmon::shm::MonitorTable* table;
  int count;
  int prev;                                           // 0 or 1: which copy is the previous read's
  uint32_t entry[parmon::shm::kMonitorEntries];       // table index of each watched thread
  uint32_t generation[parmon::shm::kMonitorEntries];  // of our claim
  int32_t tid[parmon::shm::kMonitorEntries];
  uint32_t cpu_count[2];  // of cpus[0] / cpus[1]
  parmon::runtime::Snap snaps[2][parmon::shm::kMonitorEntries];
  parmon::runtime::CpuSnap cpus[2][parmon::shm::kMonitorCpus];
};

namespace parmon::runtime {
namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;

double Fraction(uint64_t part, uint64_t whole);

// One watched thread's output from its figures in the table (relaxed loads, inside the sequence
// lock: the caller retries when a pass was published meanwhile). Since-reads keep the cumulative
// figures in *cur for the next read to subtract.
void Fill(const MonitorFigures& fig,
          uint32_t generation,
          int32_t tid,
          bool since,
          const Snap& p,
          Snap* cur,
          parmon_thread_figures& f) {
  const uint32_t gen = fig.generation.load(kRelaxed);
  const uint64_t last_ns = fig.last_ns.load(kRelaxed);
  f.tid = tid;
  f.cpu_busy = -1.0;
  f.utilisation = 0.0;
  if (gen != generation || last_ns == 0) {
    // The sampler has not booked it since it was watched.
    if (since)
      *cur = Snap{};
    f.cpu = -1;
    f.threads = 0;
    f.flags = PARMON_FIGURES_NONE;
    f.start_ns = f.end_ns = f.elapsed_ns = f.cpu_ns = 0;
    for (int s = 0; s < PARMON_STATE_COUNT; ++s)
      f.states_ns[s] = 0;
    return;
  }
  f.cpu = fig.last_cpu.load(kRelaxed);
  f.threads = fig.threads.load(kRelaxed);
  f.flags = (fig.flags.load(kRelaxed) & parmon::shm::kMonitorExited) ? PARMON_FIGURES_EXITED : 0;
  f.end_ns = last_ns;
  if (since) {
    const bool had = p.generation == gen && p.last_ns != 0;
    f.start_ns = had ? p.last_ns : fig.first_ns.load(kRelaxed);
    cur->generation = gen;
    cur->last_ns = last_ns;
    if (had) {
      for (int s = 0; s < PARMON_STATE_COUNT; ++s) {
        const uint64_t v = fig.states_ns[s].load(kRelaxed);
        cur->states_ns[s] = v;
        f.states_ns[s] = v - p.states_ns[s];
      }
    } else {
      for (int s = 0; s < PARMON_STATE_COUNT; ++s)
        f.states_ns[s] = cur->states_ns[s] = fig.states_ns[s].load(kRelaxed);
    }
  } else {
    f.start_ns = fig.last_begin_ns.load(kRelaxed);
    for (int s = 0; s < PARMON_STATE_COUNT; ++s)
      f.states_ns[s] = fig.last_states_ns[s].load(kRelaxed);
  }
  // CPU time is the booked running (MonitorFigures::cpu_ns holds the same).
  f.cpu_ns = f.states_ns[PARMON_STATE_RUNNING];
  f.elapsed_ns = f.end_ns > f.start_ns ? f.end_ns - f.start_ns : 0;
  if (f.elapsed_ns == 0)
    f.flags |= PARMON_FIGURES_NONE;  // no pass booked it since the previous read
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

namespace {

// Whether a thread of process `pid` has written to this session (claimed a ring): a process the
// recorder watches, e.g. another rank under the same `parmon record -- mpirun`.
bool InSession(uint32_t pid) {
  parmon::shm::SegmentHeader* seg = CurrentSegment();
  if (seg == nullptr)
    return false;
  const parmon::shm::RingControl* rings = parmon::shm::Rings(seg);
  for (uint32_t i = 0; i < seg->ring_count; ++i) {
    const uint32_t state = rings[i].state.load(std::memory_order_acquire);
    if ((state == parmon::shm::kClaimed || state == parmon::shm::kRetired) && rings[i].pid == pid)
      return true;
  }
  return false;
}

// Claims a table entry for (pid, tid; 0: every thread of pid).
int Claim(parmon_monitor* m, uint32_t pid, uint32_t watched_tid, int* index) {
  if (m->count >= static_cast<int>(kMonitorEntries))
    return PARMON_E_FULL;
  MonitorTable* t = m->table;
  const uint32_t n = t->entry_count < kMonitorEntries ? t->entry_count : kMonitorEntries;
  for (uint32_t i = 0; i < n; ++i) {
    MonitorEntry& e = t->entries[i];
    uint32_t expected = parmon::shm::kMonitorFree;
    if (e.state.load(kRelaxed) != expected ||
        !e.state.compare_exchange_strong(expected, parmon::shm::kMonitorClaiming,
                                         std::memory_order_acquire))
      continue;
    e.pid = pid;
    e.tid = watched_tid;
    e.generation = e.generation + 1 == 0 ? 1 : e.generation + 1;
    const int k = m->count;
    m->entry[k] = i;
    m->generation[k] = e.generation;
    m->tid[k] = static_cast<int32_t>(watched_tid);
    std::memset(&m->snaps[m->prev][k], 0, sizeof(Snap));
    // Release: the sampler that sees Watched (acquire) sees pid, tid and generation.
    e.state.store(parmon::shm::kMonitorWatched, std::memory_order_release);
    m->count = k + 1;
    if (index != nullptr)
      *index = k;
    return PARMON_OK;
  }
  return PARMON_E_FULL;
}

}  // namespace

PARMON_EXPORT int parmon_monitor_watch(parmon_monitor* m, int32_t tid, int* index) {
  if (m == nullptr || tid < PARMON_PROCESS)
    return PARMON_E_INVALID;
  if (tid == PARMON_SELF)
    tid = parmon_thread_id();
  return Claim(m, static_cast<uint32_t>(getpid()),
               tid == PARMON_PROCESS ? 0 : static_cast<uint32_t>(tid), index);
}

PARMON_EXPORT int parmon_monitor_watch_pid(parmon_monitor* m,
                                           int32_t pid,
                                           int32_t tid,
                                           int* index) {
  if (m == nullptr || pid < 0 || tid < PARMON_PROCESS || (tid == PARMON_SELF && pid != 0))
    return PARMON_E_INVALID;
  if (pid == 0 || pid == static_cast<int32_t>(getpid()))
    return parmon_monitor_watch(m, tid, index);
  if (!InSession(static_cast<uint32_t>(pid)))
    return PARMON_E_INVALID;
  return Claim(m, static_cast<uint32_t>(pid),
               tid == PARMON_PROCESS ? 0 : static_cast<uint32_t>(tid), index);
}

PARMON_EXPORT int parmon_monitor_read(parmon_monitor* m,
                                      int what,
                                      parmon_thread_figures* out,
                                      int n) {
  if (m == nullptr || (out == nullptr && n > 0) || n < 0 ||
      (what != PARMON_SINCE_LAST_READ && what != PARMON_LAST_INTERVAL))
    return -PARMON_E_INVALID;
  const bool since = what == PARMON_SINCE_LAST_READ;
  const int into = 1 - m->prev;
  Snap* cur = m->snaps[into];
  const Snap* prev = m->snaps[m->prev];
  CpuSnap* cur_cpu = m->cpus[into];
  const CpuSnap* prev_cpu = m->cpus[m->prev];
  const int count = n < m->count ? n : m->count;
  MonitorTable* t = m->table;
  // The outputs straight from the table under its sequence lock; again if a pass came meanwhile.
  uint32_t ncpu = 0;
  for (;;) {
    const uint64_t seq = t->seq.load(std::memory_order_acquire);
    if (seq & 1) {
      _mm_pause();  // the sampler thread is publishing: a few microseconds at most
      continue;
    }
    for (int i = 0; i < count; ++i)
      Fill(t->entries[m->entry[i]].figures, m->generation[i], m->tid[i], since, prev[i], &cur[i],
           out[i]);
    // Watched threads beyond `n`: their copy too, so the next read's span is the same for all.
    if (since)
      for (int i = count; i < m->count; ++i) {
        parmon_thread_figures unused;
        Fill(t->entries[m->entry[i]].figures, m->generation[i], m->tid[i], true, prev[i], &cur[i],
             unused);
      }
    ncpu = t->cpu_count.load(kRelaxed);
    if (ncpu > kMonitorCpus)
      ncpu = kMonitorCpus;
    for (uint32_t c = 0; c < ncpu; ++c) {
      const parmon::shm::MonitorCpu& src = t->cpus[c];
      if (since) {
        cur_cpu[c].busy_ns = src.busy_ns.load(kRelaxed);
        cur_cpu[c].total_ns = src.total_ns.load(kRelaxed);
      }
      cur_cpu[c].last_busy_ns = src.last_busy_ns.load(kRelaxed);
      cur_cpu[c].last_total_ns = src.last_total_ns.load(kRelaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (t->seq.load(kRelaxed) == seq)
      break;
  }
  m->cpu_count[into] = ncpu;
  const bool have_prev_cpu = m->cpu_count[m->prev] > 0;
  for (int i = 0; i < count; ++i) {
    parmon_thread_figures& f = out[i];
    if (f.elapsed_ns == 0)
      continue;
    f.utilisation = Fraction(f.states_ns[PARMON_STATE_RUNNING], f.elapsed_ns);
    if (f.cpu >= 0 && static_cast<uint32_t>(f.cpu) < ncpu) {
      const CpuSnap& cc = cur_cpu[f.cpu];
      const CpuSnap& pc = prev_cpu[f.cpu];
      if (since && have_prev_cpu && cc.total_ns > pc.total_ns)
        f.cpu_busy = Fraction(cc.busy_ns - pc.busy_ns, cc.total_ns - pc.total_ns);
      else
        f.cpu_busy = Fraction(cc.last_busy_ns, cc.last_total_ns);
    }
  }
  // The next read since this one subtracts this copy: flip.
  if (since)
    m->prev = into;
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
