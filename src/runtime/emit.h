// The runtime's internal interface for parmon's own preload libraries (MPI, POSIX, pthread
// wrappers). Exported from libparmon.so with the parmon_x_ prefix; not installed, not for programs.
#ifndef PARMON_SRC_RUNTIME_EMIT_H_
#define PARMON_SRC_RUNTIME_EMIT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// 1 while this process is recorded and not paused (one relaxed load).
int parmon_x_enabled(void);
// The address of the int parmon_x_enabled() reads, for wrappers that check it on every call
// without a function call: load it relaxed (__atomic_load_n(flag, __ATOMIC_RELAXED)).
const int* parmon_x_enabled_flag(void);
// Raw ticks of the session clock (TSC, or CLOCK_MONOTONIC ns where the TSC is not usable).
uint64_t parmon_x_now(void);
// Writes one event with the current time. kind < 256 (see format/kinds.h); nargs <= 8.
// Returns PARMON_OK or a PARMON_E_* code from parmon.h.
int parmon_x_emit(uint16_t kind,
                  const uint64_t* args,
                  unsigned nargs,
                  const void* payload,
                  uint32_t payload_size);
// The same with a timestamp taken earlier with parmon_x_now().
int parmon_x_emit_at(uint64_t ticks,
                     uint16_t kind,
                     const uint64_t* args,
                     unsigned nargs,
                     const void* payload,
                     uint32_t payload_size);
// Self-monitoring's MPI time (shm::RingControl::mpi_ticks): an MPI call of this thread began at
// `enter` (leave 0) or the open one ended at `leave` (leave == enter: not counted). Ticks of
// parmon_x_now(). Nothing when the thread has no ring yet.
void parmon_x_mpi_time(uint64_t enter, uint64_t leave);
// Interns a name: the same (name, category) gives the same id within the process; ids are unique
// in the session. category: format::StringCategory (extend it for new name families).
uint32_t parmon_x_intern(const char* name, uint32_t category);
// Records the signals that end the process again, over handlers installed since the process
// started (the MPI wrappers call it after MPI_Init: MPI libraries install their own fault
// handlers), chaining to them. Nothing when not recorded.
void parmon_x_watch_fatal_signals(void);
// The session's run mode (0 trace, 1 periodic: shm::RunMode) and period in ns, as the recorder
// put them in the segment header. Returns 0 and leaves both unchanged when not recorded.
int parmon_x_session_mode(uint32_t* mode, uint64_t* period_ns);
// The period in ns as the recorder sets it now (`parmon ctl period`), for periodic aggregation
// that re-reads it at each period check (relaxed load); null when not recorded.
const uint64_t* parmon_x_period_flag(void);

#ifdef __cplusplus
}
#endif

#endif  // PARMON_SRC_RUNTIME_EMIT_H_
