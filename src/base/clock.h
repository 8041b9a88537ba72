// The session clock. Program threads stamp events with the raw TSC (one rdtsc, ~25 cycles); the
// recorder converts ticks to nanoseconds of one session time base when it drains the rings, so
// every event of a session, whatever its source, lies on one time line.
//
// Time base: the kernel's perf clock (local_clock), converted from the TSC with the exact
// mult/shift/zero the kernel publishes in a perf_event mmap page (cap_user_time_zero, Linux 4.1).
// Context-switch records from perf_event_open carry the same clock, so they need no conversion.
// Where perf_event_open is refused, the base is CLOCK_MONOTONIC and the TSC rate is measured
// against it. Where the TSC is not invariant, threads read CLOCK_MONOTONIC instead of the TSC.
#ifndef PARMON_SRC_BASE_CLOCK_H_
#define PARMON_SRC_BASE_CLOCK_H_

#include <time.h>
#include <x86intrin.h>

#include <cstdint>
#include <string>

namespace parmon {

inline uint64_t ReadTsc() {
  return __rdtsc();
}

// The time of clock ID in nanoseconds.
inline uint64_t ClockNs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t MonotonicNs() {
  return ClockNs(CLOCK_MONOTONIC);
}

inline uint64_t RealtimeNs() {
  return ClockNs(CLOCK_REALTIME);
}

// The CPU time of the calling thread (the kernel's per-thread CPU clock).
inline uint64_t ThreadCpuNs() {
  return ClockNs(CLOCK_THREAD_CPUTIME_ID);
}

// True when the CPU reports an invariant TSC (CPUID 0x80000007 EDX bit 8) and the kernel uses it.
bool TscIsInvariant();

enum class ClockBase : uint32_t { kPerf = 1, kMonotonic = 2 };

// ticks -> ns: ns = zero + (ticks * mult) >> shift, computed without overflow as the kernel does.
struct TickConversion {
  ClockBase base = ClockBase::kMonotonic;
  bool ticks_are_tsc = true;  // false: ticks are already ns of CLOCK_MONOTONIC
  uint64_t zero = 0;
  uint32_t mult = 1;
  uint32_t shift = 0;

  // zero + ticks * mult / 2^shift, rounded down: one 64 x 32-bit multiply into 128 bits (the
  // product stays below 2^96), the same value as splitting ticks at the shift.
  uint64_t ToNs(uint64_t ticks) const {
    return zero + static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * mult) >> shift);
  }
  // Nanoseconds of the base clock now.
  uint64_t NowNs() const { return ticks_are_tsc ? ToNs(ReadTsc()) : MonotonicNs(); }
  std::string Describe() const;
};

// A (TSC, CLOCK_MONOTONIC) pair read back to back, from the tightest of several brackets.
struct TscSample {
  uint64_t tsc = 0;
  uint64_t ns = 0;
};
TscSample SampleTscAndMonotonic();
// The conversion through b with the rate measured from a to b (a long baseline gives a precise
// rate; anchoring at a recent b keeps the error of events near it small).
TickConversion ConversionFromSamples(const TscSample& a, const TscSample& b);

// Chooses the session time base: the perf clock when the kernel publishes the TSC conversion,
// else CLOCK_MONOTONIC with a measured TSC rate (a 1 ms calibration, refined by the recorder), else
// plain CLOCK_MONOTONIC.
TickConversion CalibrateClock();

// The perf clock's conversion, when available (used by CalibrateClock; exposed for tests).
bool PerfTickConversion(TickConversion* out);

}  // namespace parmon

#endif  // PARMON_SRC_BASE_CLOCK_H_
