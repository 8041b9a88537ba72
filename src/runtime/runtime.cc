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
// Beside this file: ring_slow.cc (the slow paths; ring.h declares the ring and the state they
// share with the hot path), intern.cc (the table of registered names) and segment.cc (mapping
// the recorder's segment); runtime/internal.h declares what they share.
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
#include "runtime/ring.h"
#include "runtime/shm_abi.h"

#define PARMON_EXPORT extern "C" __attribute__((visibility("default")))

namespace parmon::runtime {

using format::Kind;
using shm::RingControl;
using shm::SegmentHeader;
using shm::Slot;

// constinit: no dynamic initialiser may run after Init mapped the shared page here (it would
// write zeros into the recorder's page, pausing every process of the session).
constinit shm::ControlPage g_control_page;
SegmentHeader* g_segment = nullptr;
bool g_use_tsc = true;
uint64_t g_test_skew_ticks = 0;
__thread ThreadRing t_ring __attribute__((tls_model("initial-exec")));

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

namespace {

bool g_api_paused = false;  // parmon_pause() holds this process (private page in place)

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
