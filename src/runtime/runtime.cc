// libparmon: the program-side runtime. See shm_abi.h for the ring protocol it shares with the
// recorder.
//
// Hot path (one event): one relaxed load of the process's enabled flag, a compare of the thread's
// cached head against its cached limit, one rdtsc, two 8-byte stores and one release store of the
// head. No lock, no system call, no allocation. Everything else -- attaching a thread to a ring,
// waiting for space, reporting drops -- lives in out-of-line slow paths.
//
// This library links only libc; it calls the kernel directly (syscall()) where it needs files, so
// parmon's own I/O wrappers never see it and it cannot recurse into them.
//
// Beside this file: intern.cc (the table of registered names) and segment.cc (mapping the
// recorder's segment); runtime/internal.h declares what they share.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
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
#include <cstring>

#include "format/kinds.h"
#include "parmon/parmon.h"
#include "runtime/emit.h"
#include "runtime/internal.h"
#include "runtime/shm_abi.h"

#define PARMON_EXPORT extern "C" __attribute__((visibility("default")))
#define PARMON_HOT __attribute__((always_inline)) inline
#define PARMON_COLD __attribute__((noinline, cold))

namespace parmon::runtime {
namespace {

using format::Kind;
using shm::RingControl;
using shm::SegmentHeader;
using shm::Slot;

// Process-wide state. g_control_page.enabled is the hot path's one check. The page is alone in
// its page of .bss (aligned, one page long) and Init replaces it with the segment's ControlPage
// (mremap of the shared page onto this address), so the flag reads 1 once the segment is mapped
// and follows `parmon ctl pause/resume` in place; parmon_pause() puts a private zero page there.
// Relaxed loads suffice: a thread that sees 1 late records nothing, one that sees 1 early finds
// the segment already published before the page was switched (a system call).
// constinit: no dynamic initialiser may run after Init mapped the shared page here (it would
// write zeros into the recorder's page, pausing every process of the session).
constinit shm::ControlPage g_control_page;
constexpr std::atomic<int>& g_enabled = g_control_page.enabled;
SegmentHeader* g_segment = nullptr;
bool g_api_paused = false;  // parmon_pause() holds this process (private page in place)
bool g_use_tsc = true;
pid_t g_announced_pid = 0;
pthread_key_t g_exit_key;

enum ThreadRingState : uint8_t { kUnattached = 0, kAttached = 1, kNoRing = 2, kRetiredThread = 3 };

struct ThreadRing {
  Slot* slots;
  uint64_t mask;
  uint64_t head;   // next slot to write (free-running)
  uint64_t limit;  // cached tail + capacity: head may reach it without reading tail
  RingControl* ctl;
  uint8_t state;
  uint8_t in_slow_path;   // guards against re-entry from a signal handler in the slow path
  uint64_t drop_first;    // time of the first event of the current streak of drops
  uint64_t drop_pending;  // drops not yet reported in a Lost event
  // The ring's pages are made resident ahead of the writer, a stretch at a time, from the slow
  // path (see Populate): slots before populated_to are, UINT64_MAX once the whole ring is. The
  // cached limit never passes it, so the hot path takes no page fault.
  uint64_t populated_from;
  uint64_t populated_to;
};

__thread ThreadRing t_ring __attribute__((tls_model("initial-exec")));

// Test hook: PARMON_MPI_CLOCK_SKEW_NS pretends this process's clock is off by a known amount
// (ns) for every event a preload library stamps (parmon_x_now, parmon_x_emit): MPI, POSIX,
// pthread and stdio alike, so that the clock alignment can be checked on a whole process. The
// hot path of the program's own calls is not touched.
uint64_t g_test_skew_ticks = 0;

PARMON_HOT uint64_t Now() {
  if (g_use_tsc) [[likely]]
    return __rdtsc();
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

pid_t GetTid() {
  return static_cast<pid_t>(syscall(SYS_gettid));
}

bool MakeRoom(ThreadRing* r, uint32_t nslots, bool must_deliver);

// Writes a general event (args and payload in the slots after slot 0). Caller ensured room.
void WriteGeneral(ThreadRing* r,
                  uint64_t ticks,
                  uint8_t kind,
                  const uint64_t* args,
                  unsigned nargs,
                  const void* payload,
                  uint32_t size,
                  uint32_t nslots) {
  const uint64_t capacity_bytes = (r->mask + 1) * sizeof(Slot);
  char* base = reinterpret_cast<char*>(r->slots);
  Slot* s0 = r->slots + (r->head & r->mask);
  s0->tsc = ticks;
  s0->word = shm::MakeWord(kind, static_cast<uint8_t>(shm::kFlagGeneral | nargs << 4),
                           static_cast<uint16_t>(nslots), size);
  uint64_t pos = ((r->head + 1) & r->mask) * sizeof(Slot);
  auto put = [&](const void* src, uint64_t n) {
    const char* p = static_cast<const char*>(src);
    while (n > 0) {
      uint64_t k = capacity_bytes - pos < n ? capacity_bytes - pos : n;
      std::memcpy(base + pos, p, k);
      p += k;
      n -= k;
      pos = (pos + k) & (capacity_bytes - 1);  // capacity is a power of two: no division
    }
  };
  put(args, uint64_t{nargs} * 8);
  if (size > 0)
    put(payload, size);
  r->head += nslots;
  // Publishes slots [old head, head): pairs with the recorder's acquire load of head.
  r->ctl->head.store(r->head, std::memory_order_release);
}

uint32_t GeneralSlots(unsigned nargs, uint32_t size) {
  return 1 + static_cast<uint32_t>((uint64_t{nargs} * 8 + size + 15) / 16);
}

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

// Writes a one-slot event at the ring's head and publishes it. Caller ensured room.
PARMON_HOT void WriteOne(ThreadRing* r, uint64_t head, uint64_t ticks, uint8_t kind, uint32_t f) {
  Slot* s = r->slots + (head & r->mask);
  s->tsc = ticks;
  s->word = shm::MakeWord(kind, 0, 1, f);
  r->head = head + 1;
  // Publishes the slot: pairs with the recorder's acquire load of head.
  r->ctl->head.store(head + 1, std::memory_order_release);
}

// Emit1 when the ring is full or the clock is not the TSC. Kept out of line so that Emit1 itself
// needs no stack frame: it only tail-calls this.
[[gnu::noinline, gnu::cold]] void Emit1Slow(uint8_t kind, uint32_t field, const uint64_t* ticks) {
  ThreadRing* r = &t_ring;
  if (r->head >= r->limit && !MakeRoom(r, 1, false))
    return;
  WriteOne(r, r->head, ticks != nullptr ? *ticks : Now(), kind, field);
}

// `ticks`: a time taken earlier with Now() (preload wrappers reuse one timestamp for several
// events of a call); null: now. The common case is one relaxed load, a TLS compare, one rdtsc
// and two stores besides the head's, with no call and no frame (bench/record_loop_bench).
PARMON_HOT void Emit1(uint8_t kind, uint32_t field, const uint64_t* ticks = nullptr) {
  if (g_enabled.load(std::memory_order_relaxed) == 0) [[unlikely]]
    return;
  ThreadRing* r = &t_ring;
  const uint64_t head = r->head;
  if (head >= r->limit || (ticks == nullptr && !g_use_tsc)) [[unlikely]]
    return Emit1Slow(kind, field, ticks);
  WriteOne(r, head, ticks != nullptr ? *ticks : __rdtsc(), kind, field);
}

int EmitGeneral(uint64_t ticks,
                bool have_ticks,
                uint16_t kind,
                const uint64_t* args,
                unsigned nargs,
                const void* payload,
                uint32_t size,
                bool must_deliver) {
  if (g_enabled.load(std::memory_order_relaxed) == 0 && !(must_deliver && g_segment))
    return PARMON_E_INACTIVE;
  if (kind > 255 || nargs > 8 || (size > 0 && payload == nullptr))
    return PARMON_E_INVALID;
  if (size > PARMON_TRACE_DATA_MAX)
    return PARMON_E_TOO_LARGE;
  ThreadRing* r = &t_ring;
  uint32_t n = GeneralSlots(nargs, size);
  if (r->limit - r->head < n || r->state != kAttached) {
    if (!MakeRoom(r, n, must_deliver))
      return PARMON_E_DROPPED;
  }
  WriteGeneral(r, have_ticks ? ticks : Now(), static_cast<uint8_t>(kind), args, nargs, payload,
               size, n);
  return PARMON_OK;
}

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
PARMON_COLD bool MakeRoom(ThreadRing* r, uint32_t nslots, bool must_deliver) {
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

__attribute__((constructor)) void Construct() {
  Init();
}

__attribute__((destructor)) void Destruct() {
  // exit() does not run pthread key destructors for the thread calling it.
  RetireRing(&t_ring);
}

}  // namespace

SegmentHeader* CurrentSegment() {
  return g_segment;
}

void EmitDefString(uint32_t id, uint64_t category, const char* name) {
  uint64_t args[2] = {id, category};
  EmitGeneral(0, false, static_cast<uint16_t>(Kind::kDefString), args, 2, name,
              static_cast<uint32_t>(strnlen(name, 4096)), /*must_deliver=*/true);
}

}  // namespace parmon::runtime

using namespace parmon::runtime;  // NOLINT: the C ABI below is this file's interface

PARMON_EXPORT int parmon_is_active(void) {
  return g_enabled.load(std::memory_order_relaxed);
}

PARMON_EXPORT parmon_id parmon_region_register(const char* name) {
  return Intern(name, static_cast<uint32_t>(parmon::format::StringCategory::kRegion));
}
PARMON_EXPORT void parmon_region_enter(parmon_id region) {
  Emit1(static_cast<uint8_t>(Kind::kRegionEnter), region);
}
PARMON_EXPORT void parmon_region_leave(parmon_id region) {
  Emit1(static_cast<uint8_t>(Kind::kRegionLeave), region);
}

PARMON_EXPORT void parmon_event_name(uint32_t event_id, const char* name) {
  // Event ids are the program's own numbers; the name travels as a DefString of category kEvent,
  // which readers keep apart from interned ids.
  if (name == nullptr)
    return;
  EmitDefString(event_id, static_cast<uint64_t>(parmon::format::StringCategory::kEvent), name);
}
PARMON_EXPORT void parmon_trace_event(uint32_t event_id) {
  Emit1(static_cast<uint8_t>(Kind::kTraceEvent), event_id);
}
PARMON_EXPORT int parmon_trace_data(uint32_t event_id, const void* data, size_t size) {
  if (size > PARMON_TRACE_DATA_MAX)
    return PARMON_E_TOO_LARGE;
  if (size > 0 && data == nullptr)
    return PARMON_E_INVALID;
  uint64_t arg = event_id;
  return EmitGeneral(0, false, static_cast<uint16_t>(Kind::kTraceData), &arg, 1, data,
                     static_cast<uint32_t>(size), false);
}

PARMON_EXPORT parmon_id parmon_counter_register(const char* name) {
  return Intern(name, static_cast<uint32_t>(parmon::format::StringCategory::kCounter));
}
PARMON_EXPORT void parmon_counter_int(parmon_id counter, int64_t value) {
  uint64_t args[2] = {counter, static_cast<uint64_t>(value)};
  EmitGeneral(0, false, static_cast<uint16_t>(Kind::kCounterInt), args, 2, nullptr, 0, false);
}
PARMON_EXPORT void parmon_counter_double(parmon_id counter, double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  uint64_t args[2] = {counter, bits};
  EmitGeneral(0, false, static_cast<uint16_t>(Kind::kCounterDouble), args, 2, nullptr, 0, false);
}

PARMON_EXPORT parmon_id parmon_marker_register(const char* name) {
  return Intern(name, static_cast<uint32_t>(parmon::format::StringCategory::kMarker));
}
PARMON_EXPORT void parmon_marker(parmon_id marker) {
  Emit1(static_cast<uint8_t>(Kind::kMarker), marker);
}

PARMON_EXPORT void parmon_thread_name(const char* name) {
  if (name == nullptr)
    return;
  EmitGeneral(0, false, static_cast<uint16_t>(Kind::kThreadName), nullptr, 0, name,
              static_cast<uint32_t>(strnlen(name, 256)), true);
}
PARMON_EXPORT void parmon_process_name(const char* name) {
  if (name == nullptr)
    return;
  EmitGeneral(0, false, static_cast<uint16_t>(Kind::kProcessName), nullptr, 0, name,
              static_cast<uint32_t>(strnlen(name, 256)), true);
}

PARMON_EXPORT void parmon_pause(void) {
  if (g_segment == nullptr || g_api_paused)
    return;
  Emit1(static_cast<uint8_t>(Kind::kPause), 0);
  PrivateControlPage(&g_control_page);
  g_api_paused = true;
}
PARMON_EXPORT void parmon_resume(void) {
  if (g_segment == nullptr || !g_api_paused)
    return;
  g_api_paused = false;
  ShareControlPage(g_segment, &g_control_page);  // unless `parmon ctl pause` holds the session
  Emit1(static_cast<uint8_t>(Kind::kResume), 0);
}

PARMON_EXPORT int parmon_x_enabled(void) {
  return g_enabled.load(std::memory_order_relaxed);
}
static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free);
PARMON_EXPORT const int* parmon_x_enabled_flag(void) {
  return reinterpret_cast<const int*>(&g_enabled);
}
PARMON_EXPORT uint64_t parmon_x_now(void) {
  return Now() + g_test_skew_ticks;
}
namespace {
// parmon_x_emit and parmon_x_emit_at: ticks null means now.
int EmitForPreload(const uint64_t* ticks,
                   uint16_t kind,
                   const uint64_t* args,
                   unsigned nargs,
                   const void* payload,
                   uint32_t payload_size) {
  if (nargs <= 1 && payload_size == 0 && kind < 256 && (nargs == 0 || args[0] <= 0xffffffffu)) {
    if (g_enabled.load(std::memory_order_relaxed) == 0)
      return PARMON_E_INACTIVE;
    Emit1(static_cast<uint8_t>(kind), nargs ? static_cast<uint32_t>(args[0]) : 0, ticks);
    return PARMON_OK;
  }
  return EmitGeneral(ticks ? *ticks : 0, ticks != nullptr, kind, args, nargs, payload, payload_size,
                     false);
}
}  // namespace

PARMON_EXPORT int parmon_x_emit(uint16_t kind,
                                const uint64_t* args,
                                unsigned nargs,
                                const void* payload,
                                uint32_t payload_size) {
  if (g_test_skew_ticks != 0) [[unlikely]] {
    const uint64_t now = Now() + g_test_skew_ticks;
    return EmitForPreload(&now, kind, args, nargs, payload, payload_size);
  }
  return EmitForPreload(nullptr, kind, args, nargs, payload, payload_size);
}
PARMON_EXPORT int parmon_x_emit_at(uint64_t ticks,
                                   uint16_t kind,
                                   const uint64_t* args,
                                   unsigned nargs,
                                   const void* payload,
                                   uint32_t payload_size) {
  return EmitForPreload(&ticks, kind, args, nargs, payload, payload_size);
}

PARMON_EXPORT void parmon_x_mpi_time(uint64_t enter, uint64_t leave) {
  ThreadRing* r = &t_ring;
  if (r->state != kAttached)
    return;
  std::atomic<uint64_t>& w = r->ctl->mpi_ticks;
  const uint64_t word = w.load(std::memory_order_relaxed);  // only this thread writes it
  if (leave == 0) {  // a call begins: keep (entry - finished) with the open bit
    const uint64_t done =
        word & parmon::shm::kMpiCallOpen ? parmon::shm::MpiTicksAt(word, enter) : word;
    w.store(parmon::shm::kMpiCallOpen | (enter > done ? enter - done : 0),
            std::memory_order_relaxed);
  } else if (word & parmon::shm::kMpiCallOpen) {  // it ends: finished = leave - (entry - finished)
    w.store(parmon::shm::MpiTicksAt(word, leave), std::memory_order_relaxed);
  }
}

PARMON_EXPORT uint32_t parmon_x_intern(const char* name, uint32_t category) {
  return Intern(name, category);
}
