// libparmon: interned names (parmon_region_register, parmon_counter_register, ...,
// parmon_x_intern). A name gets one id per process; its DefString event goes into the trace the
// first time. Registration is rare, so a spin lock over a fixed table in static memory does (the
// runtime allocates nothing).
#include <sched.h>

#include <atomic>
#include <cstring>

#include "runtime/internal.h"

namespace parmon::runtime {
namespace {

// Interned names of this process, for parmon_x_intern: a small open-addressing table in static
// memory (no allocation; registration is rare and takes a spin lock).
struct InternEntry {
  uint64_t hash;
  uint32_t category;
  uint32_t id;
  char name[112];
};
constexpr uint32_t kInternSlots = 4096;
InternEntry g_intern[kInternSlots];
std::atomic<bool> g_intern_lock{false};
uint32_t g_local_ids = 1u << 31;  // ids handed out while not recording

uint64_t HashName(const char* s, uint32_t category) {
  uint64_t h = 1469598103934665603ull ^ category;
  for (; *s; ++s)
    h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
  return h | 1;
}

// Called with g_intern_lock held.
uint32_t NewId() {
  shm::SegmentHeader* seg = CurrentSegment();
  return seg ? seg->next_string_id.fetch_add(1, std::memory_order_relaxed) : g_local_ids++;
}

}  // namespace

uint32_t Intern(const char* name, uint32_t category) {
  if (name == nullptr)
    name = "";
  uint64_t h = HashName(name, category);
  while (g_intern_lock.exchange(true, std::memory_order_acquire))
    sched_yield();
  uint32_t id = 0;
  uint32_t i = static_cast<uint32_t>(h % kInternSlots);
  for (uint32_t probe = 0; probe < kInternSlots; ++probe, i = (i + 1) % kInternSlots) {
    InternEntry& e = g_intern[i];
    if (e.hash == 0) {
      id = NewId();
      e.hash = h;
      e.category = category;
      e.id = id;
      std::strncpy(e.name, name, sizeof e.name - 1);
      break;
    }
    if (e.hash == h && e.category == category && std::strncmp(e.name, name, sizeof e.name) == 0) {
      g_intern_lock.store(false, std::memory_order_release);
      return e.id;
    }
  }
  if (id == 0)  // table full: still unique, just not deduplicated
    id = NewId();
  g_intern_lock.store(false, std::memory_order_release);
  EmitDefString(id, category, name);
  return id;
}

}  // namespace parmon::runtime
