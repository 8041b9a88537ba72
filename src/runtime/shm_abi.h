// The shared-memory contract between libparmon (in the program's threads) and the recorder.
//
// Roles and ownership. The recorder creates one segment per session (a /dev/shm file named in the
// PARMON_SHM environment variable) and owns it: a program that crashes loses nothing it had
// committed, because the rings live in the recorder's memory, not the program's. The segment holds
// a header, an array of ring controls and the ring storage.
//
// Each ring has one producer (one thread of the program) and one consumer (the recorder): a
// single-producer single-consumer queue of 16-byte slots with free-running 64-bit head and tail.
//   - The producer writes slots [head, head+n) and then publishes with head.store(release). It
//     reads tail (acquire) only when its cached limit says the ring may be full, so the hot path
//     touches no shared cache line but its own head.
//   - The consumer reads head (acquire), copies slots [tail, head), then tail.store(release), which
//     hands the space back; the producer's acquire load of tail pairs with it, so the producer
//     never overwrites a slot the consumer is still reading.
// Ring states: Free -> Claiming (a thread won the CAS and fills in pid/tid) -> Claimed (release:
// pid/tid visible) -> Retired (the thread exited; release after its last head store, so a consumer
// that sees Retired with acquire and then loads head sees the final head) -> Free (set by the
// recorder after the last drain).
//
// An event is one slot, or several: slot 0 holds the TSC and a word with the kind, flags, the
// number of slots and a 32-bit field; a compact event (the common case: region enter/leave) keeps
// its only arg in that field. A general event keeps its payload length there and its u64 args and
// payload bytes in the slots that follow (wrapping around the ring end like any slot).
#ifndef PARMON_SRC_RUNTIME_SHM_ABI_H_
#define PARMON_SRC_RUNTIME_SHM_ABI_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace parmon::shm {

constexpr uint64_t kSegmentMagic = 0x48534e4f4d524150ull;  // "PARMONSH"
// 2: the run mode and the aggregation period travel in the header (run_mode, period_ns), no
// longer in PARMON_MODE / PARMON_PERIOD_NS environment variables.
// 3: futex words for wake-ups between writers and the recorder (wake_seq .. writers_waiting).
// 4: a control page (control_offset, ControlPage) the recorder writes while the program runs:
// the enabled word of the hot path (pause/resume) and the period (`parmon ctl`).
// 5: the self-monitoring table (monitor_offset, MonitorTable): threads a program watches and the
// figures the recorder's sampler publishes for them after each pass (docs/selfmon.md).
constexpr uint32_t kAbiVersion = 5;
constexpr const char* kEnvSegment = "PARMON_SHM";

struct Slot {
  uint64_t tsc;
  uint64_t word;
};
static_assert(sizeof(Slot) == 16);

constexpr uint8_t kFlagGeneral = 1;  // args and payload follow in the next slots
// In a general event, flags bits 4-7 hold the number of u64 args.
inline uint8_t WordArgCount(uint64_t w) {
  return static_cast<uint8_t>(w >> 12) & 0xf;
}

inline uint64_t MakeWord(uint8_t kind, uint8_t flags, uint16_t nslots, uint32_t field) {
  return uint64_t{kind} | uint64_t{flags} << 8 | uint64_t{nslots} << 16 | uint64_t{field} << 32;
}
inline uint8_t WordKind(uint64_t w) {
  return static_cast<uint8_t>(w);
}
inline uint8_t WordFlags(uint64_t w) {
  return static_cast<uint8_t>(w >> 8);
}
inline uint16_t WordSlots(uint64_t w) {
  return static_cast<uint16_t>(w >> 16);
}
inline uint32_t WordField(uint64_t w) {
  return static_cast<uint32_t>(w >> 32);
}

enum RingState : uint32_t { kFree = 0, kClaiming = 1, kClaimed = 2, kRetired = 3 };

enum class Overflow : uint32_t { kDrop = 0, kBlock = 1, kOverwrite = 2 };

struct alignas(64) RingControl {
  alignas(64) std::atomic<uint64_t> head;  // producer: store(release); recorder: load(acquire)
  alignas(64) std::atomic<uint64_t> tail;  // recorder: store(release); producer: load(acquire)
  alignas(64) std::atomic<uint32_t> state;
  uint32_t pid;
  uint32_t tid;
  uint32_t generation;  // incremented by each claim
  // Events this ring's producer could not write (drop/overwrite policy), cumulative. Written only
  // by the producer (relaxed); the recorder reads it after Retired, or for the status line.
  std::atomic<uint64_t> dropped;
  // Of those, how many the producer has already reported in Lost events.
  std::atomic<uint64_t> dropped_reported;
  uint64_t data_offset;  // of this ring's slots from the segment start
  // Clock ticks (Now()) the producer waited for room in its full ring (--overflow block),
  // cumulative; written only by the producer (relaxed), read by the recorder as it drains. (In
  // the line's spare bytes: a library without it leaves it 0, a recorder without it ignores it.)
  std::atomic<uint64_t> held_ticks;
  // Time this thread spent inside MPI calls (after MPI_Init, before MPI_Finalize), in clock
  // ticks, for the self-monitoring read (docs/selfmon.md) to book as communication like the
  // report does. One word, so a reader never sees half an update: bit 63 clear, the ticks of its
  // finished calls; set, a call is open and the low bits hold (its entry time - the ticks of the
  // finished calls), so that the time so far is now - low bits. Written only by the producer
  // (libparmon_mpi through parmon_x_mpi_time), relaxed; the sampler reads it. (Spare bytes of
  // the line like held_ticks: an older library leaves it 0, an older recorder ignores it.)
  std::atomic<uint64_t> mpi_ticks;
};
static_assert(sizeof(RingControl) == 192);
constexpr uint64_t kMpiCallOpen = uint64_t{1} << 63;
// A thread's MPI ticks so far at `now` (ticks) from its RingControl::mpi_ticks word.
inline uint64_t MpiTicksAt(uint64_t word, uint64_t now) {
  if (!(word & kMpiCallOpen))
    return word;
  const uint64_t base = word & ~kMpiCallOpen;
  return now > base ? now - base : 0;
}

// The page `parmon ctl` steers the program through. It is one whole page of the segment because
// libparmon maps it (MAP_FIXED | MAP_SHARED) over a page-aligned page of its own .bss that holds
// its enabled flag: the hot path's one relaxed load of that flag then reads the recorder's word in
// place, at an address that never changes (preload wrappers cache it before the segment is
// mapped), and pause costs the program no more than recording off did before ABI 4.
// A process paused by parmon_pause() puts a private zero page there instead, and maps the shared
// page back on parmon_resume().
struct alignas(4096) ControlPage {
  // 1 while the session records, 0 while `parmon ctl pause` holds it. Written by the recorder
  // (relaxed: a thread that sees the change a little late records or skips a few more events,
  // which the paused range's bounds account for, see docs/control.md).
  std::atomic<int> enabled{0};
  uint32_t reserved0 = 0;
  // The aggregation period in ns of periodic mode (`parmon ctl period 5ms`); the preload families
  // re-read it at each of their period checks. Starts as SegmentHeader::period_ns.
  std::atomic<uint64_t> period_ns{0};
  // Bumped by every change the recorder makes here (pause, resume, period).
  std::atomic<uint64_t> change_seq{0};
};
static_assert(sizeof(ControlPage) == 4096);
static_assert(std::atomic<int>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free);

// The self-monitoring table (ABI 5, docs/selfmon.md). A program (libparmon's parmon_monitor_*)
// claims entries naming the threads it wants watched; the recorder's sampler thread, the table's
// only writer of figures, adds each pass's booking of those threads to their entries and
// publishes the pass under one sequence lock, so a read of many threads sees one pass for all.
//   - Claiming (program): an entry's `state` goes Free -> Claiming by CAS; the program writes
//     pid, tid and bumps generation, then stores Watched (release). Closing stores Free.
//   - Publishing (sampler thread): seq.store(odd, relaxed); fence(release); figures with relaxed
//     atomic stores; seq.store(even, release). An entry whose generation is not the figures'
//     `generation` is reset (its figures start at zero) in the pass that first sees it.
//   - Reading (program): s = seq.load(acquire), odd: retry; figures with relaxed loads;
//     fence(acquire); seq.load(relaxed) == s, else retry. No system call, no lock.
// All figures are cumulative since the entry was (re)watched, so a reader keeps its previous copy
// and subtracts; `last_*` hold the latest pass's interval alone.
constexpr uint32_t kMonitorEntries = 256;  // watched threads per session
constexpr uint32_t kMonitorCpus = 256;     // CPUs whose busy time is published
constexpr int kMonitorStates = 7;          // format::ThreadState as reports show them (kOther)

enum MonitorEntryState : uint32_t { kMonitorFree = 0, kMonitorClaiming = 1, kMonitorWatched = 2 };

// What the sampler booked for one watched thread (tid) or a whole process (tid 0: every thread
// of pid, summed). Written only inside the table's sequence lock.
struct MonitorFigures {
  std::atomic<uint32_t> generation;  // of the claim these figures belong to (0: none yet)
  std::atomic<uint32_t> flags;       // kMonitorExited, ...
  std::atomic<int32_t> last_cpu;     // the CPU it was last seen on, -1 unknown
  std::atomic<uint32_t> threads;     // threads booked in the latest pass (a process: several)
  std::atomic<uint64_t> first_ns;    // session ns where the figures begin (0: nothing yet)
  std::atomic<uint64_t> last_ns;     // ... and end: the end of the latest booked interval
  std::atomic<uint64_t> states_ns[kMonitorStates];  // cumulative, report order
  std::atomic<uint64_t> cpu_ns;                     // cumulative CPU time
  std::atomic<uint64_t> last_begin_ns;              // the latest pass's interval: its start
  std::atomic<uint64_t> last_states_ns[kMonitorStates];
  std::atomic<uint64_t> last_cpu_ns;
};
constexpr uint32_t kMonitorExited = 1;  // the thread ended (for a process: the process did)

struct alignas(64) MonitorEntry {
  std::atomic<uint32_t> state;  // MonitorEntryState, written by the program
  uint32_t pid;                 // written by the program while Claiming
  uint32_t tid;                 // 0: the whole process
  uint32_t generation;          // bumped by each claim
  MonitorFigures figures;       // written by the recorder
};

// A CPU's busy and total time, cumulative, and over its latest sample (/proc/stat, every 50 ms).
struct MonitorCpu {
  std::atomic<uint64_t> busy_ns;
  std::atomic<uint64_t> total_ns;
  std::atomic<uint64_t> last_busy_ns;
  std::atomic<uint64_t> last_total_ns;
};

struct alignas(4096) MonitorTable {
  std::atomic<uint64_t> seq;        // the sequence lock over everything the recorder writes
  std::atomic<uint64_t> passes;     // sampler passes published (0: no sampler has published)
  std::atomic<uint64_t> pass_ns;    // session ns of the latest pass
  std::atomic<uint64_t> period_ns;  // the sampler's period then
  std::atomic<uint32_t> cpu_count;  // entries of cpus[] in use
  uint32_t entry_count;             // kMonitorEntries
  MonitorCpu cpus[kMonitorCpus];
  MonitorEntry entries[kMonitorEntries];
};
static_assert(sizeof(MonitorEntry) % 64 == 0);

enum SessionState : uint32_t { kRecording = 0, kFinishing = 1 };

// `parmon record --mode`: trace keeps every event, periodic asks the sources and the preload
// families to keep per-period aggregates (of period_ns) instead.
enum class RunMode : uint32_t { kTrace = 0, kPeriodic = 1 };

struct alignas(64) SegmentHeader {
  uint64_t magic;
  uint32_t abi_version;
  uint32_t ring_count;
  uint64_t segment_size;
  uint64_t ring_slots;  // a power of two
  uint64_t rings_offset;
  uint32_t overflow;  // Overflow
  uint32_t ticks_are_tsc;
  uint32_t recorder_pid;
  std::atomic<uint32_t> session_state;
  std::atomic<uint32_t> next_string_id;
  uint32_t run_mode;  // RunMode, set before the command starts and never changed
  // Events from threads that found no free ring (more threads alive than rings).
  std::atomic<uint64_t> unattached_dropped;
  // The session's period (`parmon record -t`) in ns at the start: the interval of periodic
  // aggregates. Changes while the program runs are in ControlPage::period_ns.
  uint64_t period_ns;
  // Of the ControlPage from the segment start (a multiple of 4096).
  uint64_t control_offset;
  // Of the MonitorTable from the segment start (a multiple of 4096; ABI 5).
  uint64_t monitor_offset;
  // Wake-ups between writers and the recorder, futex words of the shared mapping (FUTEX_WAIT
  // without FUTEX_PRIVATE_FLAG works across processes). Kept on their own cache line: they are
  // written only when a ring is half full or a writer waits, never on the hot path.
  //   wake_seq           a writer bumps it when its ring crossed half full or it waits for
  //                      space; the recorder sleeps on it (value read before its last drain, so
  //                      no bump is missed) instead of only for its window;
  //   recorder_sleeping  set while the recorder is in FUTEX_WAIT: writers skip the system call
  //                      otherwise;
  //   space_seq          the recorder bumps it after a drain when writers_waiting > 0 and wakes
  //                      them all; a blocked writer sleeps on it instead of napping 50 us.
  alignas(64) std::atomic<uint32_t> wake_seq;
  std::atomic<uint32_t> recorder_sleeping;
  std::atomic<uint32_t> space_seq;
  std::atomic<uint32_t> writers_waiting;
};

// FUTEX_WAIT on a shared word for at most timeout_ns (returns at once when *word != expected)
// and FUTEX_WAKE of up to n waiters. Raw system calls: usable from the preloaded runtime.
inline void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000),
              static_cast<long>(timeout_ns % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}
inline void FutexWake(std::atomic<uint32_t>* word, int n) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, n, nullptr, nullptr, 0);
}

// The recorder's notice that it freed space: wakes the writers waiting for room, if any (a load
// of one shared word otherwise). seq_cst pairs with the writer's increment of writers_waiting
// before it looks at the tail.
inline void WakeWaitingWriters(SegmentHeader* h) {
  if (h->writers_waiting.load(std::memory_order_seq_cst) == 0)
    return;
  h->space_seq.fetch_add(1, std::memory_order_seq_cst);
  FutexWake(&h->space_seq, INT_MAX);
}

// A writer's request that the recorder drain now (its ring is filling or it waits for space).
inline void WakeRecorder(SegmentHeader* h) {
  h->wake_seq.fetch_add(1, std::memory_order_seq_cst);
  if (h->recorder_sleeping.load(std::memory_order_seq_cst))
    FutexWake(&h->wake_seq, 1);
}

inline ControlPage* Control(SegmentHeader* h) {
  return reinterpret_cast<ControlPage*>(reinterpret_cast<char*>(h) + h->control_offset);
}
inline MonitorTable* Monitor(SegmentHeader* h) {
  return reinterpret_cast<MonitorTable*>(reinterpret_cast<char*>(h) + h->monitor_offset);
}
inline RingControl* Rings(SegmentHeader* h) {
  return reinterpret_cast<RingControl*>(reinterpret_cast<char*>(h) + h->rings_offset);
}
inline Slot* RingSlots(SegmentHeader* h, const RingControl& r) {
  return reinterpret_cast<Slot*>(reinterpret_cast<char*>(h) + r.data_offset);
}

// Largest number of slots one event may span (slot 0 + 6 args + PARMON_TRACE_DATA_MAX bytes).
constexpr uint32_t kMaxEventSlots = 1 + (8 * 8 + 32768 + 15) / 16;

}  // namespace parmon::shm

#endif  // PARMON_SRC_RUNTIME_SHM_ABI_H_
