#include "base/clock.h"

#include <cpuid.h>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

namespace parmon {

bool TscIsInvariant() {
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid(0x80000007, &eax, &ebx, &ecx, &edx) && (edx & (1u << 8)))
    return true;
  // Some hypervisors hide the CPUID bit but the kernel still trusts the TSC ("nonstop_tsc").
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0)
      return line.find(" constant_tsc") != std::string::npos &&
             line.find(" nonstop_tsc") != std::string::npos;
  }
  return false;
}

bool PerfTickConversion(TickConversion* out) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.disabled = 1;
  int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0)
    return false;
  long page = sysconf(_SC_PAGESIZE);
  void* map = mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, 0);
  bool ok = false;
  if (map != MAP_FAILED) {
    auto* pc = static_cast<perf_event_mmap_page*>(map);
    for (int attempt = 0; attempt < 100 && !ok; ++attempt) {
      uint32_t seq = __atomic_load_n(&pc->lock, __ATOMIC_ACQUIRE);
      bool usable = pc->cap_user_time && pc->cap_user_time_zero;
      TickConversion c;
      c.base = ClockBase::kPerf;
      c.ticks_are_tsc = true;
      c.zero = pc->time_zero;
      c.mult = pc->time_mult;
      c.shift = pc->time_shift;
      __atomic_thread_fence(__ATOMIC_ACQUIRE);
      if (__atomic_load_n(&pc->lock, __ATOMIC_RELAXED) != seq || (seq & 1))
        continue;
      if (!usable)
        break;
      *out = c;
      ok = true;
    }
    munmap(map, page);
  }
  close(fd);
  return ok;
}

TickConversion CalibrateClock() {
  TickConversion c;
  if (!TscIsInvariant()) {
    c.base = ClockBase::kMonotonic;
    c.ticks_are_tsc = false;
    return c;
  }
  if (PerfTickConversion(&c))
    return c;
  TscSample a = SampleTscAndMonotonic();
  while (MonotonicNs() - a.ns < 1000000) {
  }
  return ConversionFromSamples(a, SampleTscAndMonotonic());
}

TscSample SampleTscAndMonotonic() {
  TscSample s;
  uint64_t best = ~uint64_t{0};
  for (int i = 0; i < 16; ++i) {
    uint64_t a = ReadTsc();
    uint64_t n = MonotonicNs();
    uint64_t b = ReadTsc();
    if (b - a < best) {
      best = b - a;
      s.tsc = a + (b - a) / 2;
      s.ns = n;
    }
  }
  return s;
}

TickConversion ConversionFromSamples(const TscSample& a, const TscSample& b) {
  TickConversion c;
  c.base = ClockBase::kMonotonic;
  c.ticks_are_tsc = true;
  c.shift = 24;
  double ns_per_tick = static_cast<double>(b.ns - a.ns) / static_cast<double>(b.tsc - a.tsc);
  c.mult = static_cast<uint32_t>(ns_per_tick * (1u << 24) + 0.5);
  // zero so that ToNs(b.tsc) == b.ns (wrapping arithmetic, as in the kernel's formula).
  c.zero = 0;
  c.zero = b.ns - c.ToNs(b.tsc);
  return c;
}

std::string TickConversion::Describe() const {
  std::string base_name = base == ClockBase::kPerf ? "perf clock" : "CLOCK_MONOTONIC";
  if (!ticks_are_tsc)
    return base_name + " read directly (TSC not invariant)";
  return "TSC converted to " + base_name +
         (base == ClockBase::kPerf ? " (kernel mult/shift)" : " (measured rate)");
}

}  // namespace parmon
