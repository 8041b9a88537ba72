// libparmon's per-thread ring and the process-wide state its hot path reads (runtime.cc) and its
// slow paths keep (ring_slow.cc: attaching a thread, waiting for room, reporting drops, the
// library's start-up). Hidden, like all of the library but its C API.
#pragma once

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <atomic>
#include <cstdint>

#include "runtime/shm_abi.h"

#define PARMON_HOT __attribute__((always_inline)) inline
#define PARMON_COLD __attribute__((noinline, cold))

namespace parmon::runtime {

enum ThreadRingState : uint8_t { kUnattached = 0, kAttached = 1, kNoRing = 2, kRetiredThread = 3 };

struct ThreadRing {
  shm::Slot* slots;
  uint64_t mask;
  uint64_t head;   // next slot to write (free-running)
  uint64_t limit;  // cached tail + capacity: head may reach it without reading tail
  shm::RingControl* ctl;
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

extern __thread ThreadRing t_ring __attribute__((tls_model("initial-exec")));

// Process-wide state. g_control_page.enabled is the hot path's one check. The page is alone in
// its page of .bss (aligned, one page long) and Init replaces it with the segment's ControlPage
// (mremap of the shared page onto this address), so the flag reads 1 once the segment is mapped
// and follows `parmon ctl pause/resume` in place; parmon_pause() puts a private zero page there.
// Relaxed loads suffice: a thread that sees 1 late records nothing, one that sees 1 early finds
// the segment already published before the page was switched (a system call).
extern shm::ControlPage g_control_page;
inline constexpr std::atomic<int>& g_enabled = g_control_page.enabled;
extern shm::SegmentHeader* g_segment;
extern bool g_use_tsc;  // the session clock is the TSC (else CLOCK_MONOTONIC ns)
// Test hook: PARMON_MPI_CLOCK_SKEW_NS pretends this process's clock is off by a known amount
// (ns) for every event a preload library stamps (parmon_x_now, parmon_x_emit): MPI, POSIX,
// pthread and stdio alike, so that the clock alignment can be checked on a whole process. The
// hot path of the program's own calls is not touched.
extern uint64_t g_test_skew_ticks;

PARMON_HOT uint64_t Now() {
  if (g_use_tsc) [[likely]]
    return __rdtsc();
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline pid_t GetTid() {
  return static_cast<pid_t>(syscall(SYS_gettid));
}

// The slots a general event of nargs arguments and a payload of `size` bytes takes.
inline uint32_t GeneralSlots(unsigned nargs, uint32_t size) {
  return 1 + static_cast<uint32_t>((uint64_t{nargs} * 8 + size + 15) / 16);
}

// Writes a general event (args and payload in the slots after slot 0). Caller ensured room
// (runtime.cc).
void WriteGeneral(ThreadRing* r,
                  uint64_t ticks,
                  uint8_t kind,
                  const uint64_t* args,
                  unsigned nargs,
                  const void* payload,
                  uint32_t size,
                  uint32_t nslots);

// Slow path: attach, refresh the cached limit, report drops, and apply the overflow policy
// (ring_slow.cc). False: no room (the event is dropped and counted).
PARMON_COLD bool MakeRoom(ThreadRing* r, uint32_t nslots, bool must_deliver);
// Gives the thread's ring back to the recorder (thread exit, library destructor).
void RetireRing(ThreadRing* r);
// The library's start-up: maps the session's segment, if any, and attaches the main thread.
void Init();

}  // namespace parmon::runtime
