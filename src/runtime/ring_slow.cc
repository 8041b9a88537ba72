// libparmon's slow paths (ring.h): a thread attaching to a ring, making its pages resident,
// waiting for room by the overflow policy, reporting drops, giving the ring back, and the
// library's start-up. runtime.cc has the hot path they stay out of.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "format/kinds.h"
#include "runtime/internal.h"
#include "runtime/ring.h"
#include "runtime/shm_abi.h"

namespace parmon::runtime {
namespace {

using format::Kind;
using shm::RingControl;
using shm::SegmentHeader;
using shm::Slot;

pid_t g_announced_pid = 0;
pthread_key_t g_exit_key;

// Emits the Lost event for a streak of drops once there is room again. Called with room for
// `reserve` more slots ensured for the caller's own event.
void ReportDrops(ThreadRing* r, uint32_t reserve) {
  const uint32_t n = GeneralSlots(2, 0);
  uint64_t free_slots = r->limit - r->head;
  if (free_slots < uint64_t{n} + reserve)
    return;
  uint64_t args[2] = {r->drop_pending, r->drop_first};
  WriteGeneral(r, Now(), static_cast<uint8_t>(Kind::kLost), args, 2, nullptr, 0, n);
  r->ctl->dropped_reported.store(
      r->ctl->dropped_reported.load(std::memory_order_relaxed) + r->drop_pending,
      std::memory_order_relaxed);
  r->drop_pending = 0;
}

void OnThreadExit(void*) {
  RetireRing(&t_ring);
}

void AnnounceProcess(ThreadRing* r);

#ifdef MADV_POPULATE_WRITE
constexpr int kMadvPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kMadvPopulateWrite = 23;  // <linux/mman.h>, Linux 5.14
#endif

// A thread's ring is populated 256 KiB first (64 pages, ~0.1 ms), then in stretches that double,
// as its writer reaches them: a thread that writes little does not pay to fault in a whole
// 4 MiB ring when it starts (1-2 ms, and longer for the threads it holds up meanwhile).
constexpr uint64_t kFirstPopulateSlots = (256u << 10) / sizeof(Slot);

void Populate(ThreadRing* r) {
  const uint64_t capacity = r->mask + 1;
  const uint64_t done = r->populated_to - r->populated_from;
  uint64_t n = done == 0 ? kFirstPopulateSlots : done;  // doubling
  if (done + n >= capacity || capacity * sizeof(Slot) <= 4096) {
    n = capacity - done;
    r->populated_to = UINT64_MAX;
  } else {
    r->populated_to += n;
  }
  // The stretch, in ring offsets, may wrap; madvise wants page-aligned starts (stretches are
  // whole pages, and the ring starts on one, but a reused ring's head need not).
  uint64_t off = (r->populated_from + done) & r->mask;
  char* base = reinterpret_cast<char*>(r->slots);
  auto advise = [&](uint64_t first_slot, uint64_t slots) {
    uint64_t b = first_slot * sizeof(Slot) / 4096 * 4096;
    uint64_t e = (first_slot + slots) * sizeof(Slot);
    madvise(base + b, e - b, kMadvPopulateWrite);
  };
  if (off + n <= capacity) {
    advise(off, n);
  } else {
    advise(off, capacity - off);
    advise(0, n - (capacity - off));
  }
}

uint64_t CappedLimit(const ThreadRing* r, uint64_t limit) {
  return limit < r->populated_to ? limit : r->populated_to;
}

PARMON_COLD bool Attach(ThreadRing* r) {
  SegmentHeader* seg = g_segment;
  if (seg == nullptr)
    return false;
  RingControl* rings = shm::Rings(seg);
  pid_t pid = getpid();
  pid_t tid = GetTid();
  for (uint32_t i = 0; i < seg->ring_count; ++i) {
    uint32_t expected = shm::kFree;
    if (rings[i].state.load(std::memory_order_relaxed) != shm::kFree)
      continue;
    if (!rings[i].state.compare_exchange_strong(expected, shm::kClaiming,
                                                std::memory_order_acquire))
      continue;
    RingControl* c = &rings[i];
    c->pid = static_cast<uint32_t>(pid);
    c->tid = static_cast<uint32_t>(tid);
    c->generation += 1;
    c->dropped.store(0, std::memory_order_relaxed);
    c->dropped_reported.store(0, std::memory_order_relaxed);
    c->mpi_ticks.store(0, std::memory_order_relaxed);
    r->ctl = c;
    r->slots = shm::RingSlots(seg, *c);
    r->mask = seg->ring_slots - 1;
    // A free ring is fully drained: head == tail. Acquire pairs with the recorder's last release
    // of tail, so the slots are ours to overwrite.
    r->head = c->head.load(std::memory_order_relaxed);
    r->drop_pending = 0;
    r->state = kAttached;
    // Fault the ring's pages in ahead of the hot path (MADV_POPULATE_WRITE, Linux 5.14), rather
    // than one page fault per 256 events on its first lap (measured: ~100 ns per MPI call with
    // a 64M ring). Older kernels refuse the advice; then the first lap faults.
    r->populated_from = r->populated_to = r->head;
    Populate(r);
    r->limit = CappedLimit(r, c->tail.load(std::memory_order_acquire) + seg->ring_slots);
    // Release: the recorder that sees Claimed (acquire) sees pid/tid/generation.
    c->state.store(shm::kClaimed, std::memory_order_release);
    pthread_setspecific(g_exit_key, reinterpret_cast<void*>(1));
    if (g_announced_pid != pid)
      AnnounceProcess(r);
    return true;
  }
  return false;
}

// Slow path: attach, refresh the cached limit, report drops, and apply the overflow policy.
}  // namespace

void RetireRing(ThreadRing* r) {
  if (r->state != kAttached)
    return;
  if (r->drop_pending > 0) {
    uint64_t tail = r->ctl->tail.load(std::memory_order_acquire);
    r->limit = tail + r->mask + 1;
    ReportDrops(r, 0);
  }
  // Release: the recorder that sees Retired (acquire) and then loads head sees the final head.
  r->ctl->state.store(shm::kRetired, std::memory_order_release);
  r->state = kRetiredThread;
  r->limit = 0;
  r->head = 0;
}

bool MakeRoom(ThreadRing* r, uint32_t nslots, bool must_deliver) {
  if (r->in_slow_path)
    return false;  // a signal handler interrupted our own slow path
  r->in_slow_path = 1;
  // The program's errno survives whatever system calls attaching or waiting makes.
  const int saved_errno = errno;
  bool ok = false;
  SegmentHeader* seg = g_segment;
  // A thread whose ring was retired as it exited (its key destructor, or the library's destructor
  // at exit) may still emit from destructors that run later (libomp's, say): it takes a ring
  // again, under the same location, rather than losing those events.
  if ((r->state == kUnattached || r->state == kRetiredThread) && !Attach(r))
    r->state = kNoRing;
  if (r->state != kAttached) {
    if (seg)
      seg->unattached_dropped.fetch_add(1, std::memory_order_relaxed);
    r->in_slow_path = 0;
    errno = saved_errno;
    return false;
  }
  const uint64_t capacity = r->mask + 1;
  uint32_t need = nslots;
  bool waiting = false;  // counted in seg->writers_waiting
  unsigned waits = 0;    // futex waits of at most 2 ms each
  // When the thread began to wait for room (block mode): the time parmon held it is added up in
  // the ring's control (held_ticks), so that reports book it as parmon's, not as the program's.
  uint64_t wait_begin = 0;
  for (unsigned spins = 0;; ++spins) {
    // Acquire pairs with the recorder's release store of tail: the slots below tail are free.
    const uint64_t tail = r->ctl->tail.load(std::memory_order_acquire);
    const uint64_t free_to = tail + capacity;
    const uint64_t half = tail + capacity / 2;
    // Half full: ask the recorder to drain now rather than at the end of its window (one
    // atomic add; a system call only when it sleeps).
    if (spins == 0 && r->head >= half)
      shm::WakeRecorder(seg);
    r->limit = CappedLimit(r, free_to);
    if (r->limit - r->head < need && r->populated_to < free_to) {
      Populate(r);  // the writer reached the end of the resident stretch: the next one
      r->limit = CappedLimit(r, free_to);
    }
    // Below half full: come back at the half mark (see above).
    if (r->head < half && half < r->limit && r->head + need <= half)
      r->limit = half;
    if (r->drop_pending > 0)
      ReportDrops(r, need);
    if (r->limit - r->head >= need) {
      ok = true;
      break;
    }
    auto policy = static_cast<shm::Overflow>(seg->overflow);
    bool wait = must_deliver || policy == shm::Overflow::kBlock;
    if (!wait || seg->session_state.load(std::memory_order_relaxed) == shm::kFinishing ||
        (must_deliver && waits > 500)) {
      if (r->drop_pending == 0)
        r->drop_first = Now();
      ++r->drop_pending;
      r->ctl->dropped.store(r->ctl->dropped.load(std::memory_order_relaxed) + 1,
                            std::memory_order_relaxed);
      break;
    }
    if (wait_begin == 0)
      wait_begin = Now();
    if (spins < 64) {
      _mm_pause();
      continue;
    }
    // Wait for the recorder: tell it (it drains at once), then sleep until it says it freed
    // space. space_seq is read before the tail is looked at again, so a drain that finishes in
    // between makes the wait return at once. The 2 ms bound checks that the recorder lives.
    const uint32_t seen = seg->space_seq.load(std::memory_order_seq_cst);
    if (!waiting) {
      seg->writers_waiting.fetch_add(1, std::memory_order_seq_cst);
      waiting = true;
    }
    shm::WakeRecorder(seg);
    if (r->ctl->tail.load(std::memory_order_seq_cst) + capacity - r->head >= need)
      continue;
    shm::FutexWait(&seg->space_seq, seen, 2'000'000);
    ++waits;
    // A recorder that was killed never drains again: stop recording rather than wait forever.
    if (waits % 64 == 0 && kill(static_cast<pid_t>(seg->recorder_pid), 0) != 0 && errno == ESRCH) {
      g_enabled.store(0, std::memory_order_relaxed);
      break;
    }
  }
  if (waiting)
    seg->writers_waiting.fetch_sub(1, std::memory_order_seq_cst);
  if (wait_begin != 0) {
    const uint64_t held = r->ctl->held_ticks.load(std::memory_order_relaxed) + (Now() - wait_begin);
    r->ctl->held_ticks.store(held, std::memory_order_relaxed);
  }
  r->in_slow_path = 0;
  errno = saved_errno;
  return ok;
}

namespace {

void AnnounceProcess(ThreadRing* r) {
  pid_t pid = getpid();
  g_announced_pid = pid;
  char cmdline[1024];
  ssize_t n = 0;
  long fd = RawOpen("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    n = syscall(SYS_read, fd, cmdline, sizeof cmdline);
    syscall(SYS_close, fd);
  }
  if (n < 0)
    n = 0;
  for (ssize_t i = 0; i + 1 < n; ++i)
    if (cmdline[i] == '\0')
      cmdline[i] = ' ';
  if (n > 0 && cmdline[n - 1] == '\0')
    --n;
  uint64_t args[2] = {static_cast<uint64_t>(pid), static_cast<uint64_t>(getppid())};
  uint32_t slots = GeneralSlots(2, static_cast<uint32_t>(n));
  if (r->limit - r->head >= slots)
    WriteGeneral(r, Now(), static_cast<uint8_t>(Kind::kProcessBegin), args, 2, cmdline,
                 static_cast<uint32_t>(n), slots);
}

void AtForkChild() {
  // The child's only thread must claim its own ring; the parent's stays the parent's.
  t_ring = ThreadRing{};
}

// Rings still claimed by this pid belong to the image before an exec(): their threads are gone.
void RetireRingsOfExecedImage(SegmentHeader* seg) {
  RingControl* rings = shm::Rings(seg);
  uint32_t pid = static_cast<uint32_t>(getpid());
  for (uint32_t i = 0; i < seg->ring_count; ++i) {
    if (rings[i].state.load(std::memory_order_acquire) == shm::kClaimed && rings[i].pid == pid)
      rings[i].state.store(shm::kRetired, std::memory_order_release);
  }
}

}  // namespace

void Init() {
  SegmentHeader* seg = MapSegment();
  if (seg == nullptr)
    return;
  g_use_tsc = seg->ticks_are_tsc != 0;
  if (const char* skew = getenv("PARMON_MPI_CLOCK_SKEW_NS"); skew && *skew) {
    // Converted to ticks with a 20 ms calibration against CLOCK_MONOTONIC.
    auto mono = [] {
      timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
    };
    const uint64_t n0 = mono(), t0 = Now();
    uint64_t n1, t1;
    do {
      n1 = mono();
      t1 = Now();
    } while (n1 - n0 < 20'000'000);
    const double ticks_per_ns = static_cast<double>(t1 - t0) / static_cast<double>(n1 - n0);
    g_test_skew_ticks = static_cast<uint64_t>(
        static_cast<long long>(static_cast<double>(strtoll(skew, nullptr, 10)) * ticks_per_ns));
  }
  RetireRingsOfExecedImage(seg);
  pthread_key_create(&g_exit_key, OnThreadExit);
  pthread_atfork(nullptr, nullptr, AtForkChild);
  g_segment = seg;
  // A thread that sees enabled also sees g_segment (it reads it in Attach): the page switch is a
  // system call after the store.
  std::atomic_thread_fence(std::memory_order_release);
  if (!ShareControlPage(seg, &g_control_page)) {
    // Said, not silent: the recorder would otherwise show this process without a word why.
    char msg[128];
    const int n = snprintf(msg, sizeof msg,
                           "parmon: process %d cannot map the session's control page (errno %d); "
                           "it is not recorded\n",
                           static_cast<int>(getpid()), errno);
    if (n > 0)
      syscall(SYS_write, 2, msg, static_cast<size_t>(n) < sizeof msg ? n : sizeof msg - 1);
    return;
  }
  // The main thread attaches now so the process is announced even if it never emits.
  ThreadRing* r = &t_ring;
  MakeRoom(r, 1, false);
  WatchFatalSignals(/*over_handlers=*/false);
}

}  // namespace parmon::runtime
