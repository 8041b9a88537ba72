/*
 * parmon.h -- the C interface of libparmon, parmon's program-side runtime.
 *
 * A program calls these to mark regions, events, data and counters in its own terms. Under
 * `parmon record` each call writes one fixed-size record into the calling thread's ring in shared
 * memory (no lock, no system call, no allocation after the thread's first event). Run plainly,
 * every call is a no-op that costs a load and a branch.
 *
 * Names (regions, counters, markers) are registered once and then referred to by id. Ids are
 * unique within a recording session. Registering the same name twice in one process returns the
 * same id. Event ids for parmon_trace_event/parmon_trace_data are chosen by the program (as in the
 * Cedar monitor's trace_event/trace_data) and may be given a name with parmon_event_name.
 *
 * All functions are thread-safe and async-signal-safe after the calling thread's first event,
 * except the *_register and *_name functions, which may take a lock.
 */
#ifndef PARMON_PARMON_H_
#define PARMON_PARMON_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PARMON_API_VERSION 1

/* Largest payload parmon_trace_data accepts, in bytes. Larger payloads are refused with
 * PARMON_E_TOO_LARGE; nothing is ever truncated. */
#define PARMON_TRACE_DATA_MAX 32768

/* Return codes. */
#define PARMON_OK 0
#define PARMON_E_INACTIVE 1  /* not running under parmon, or paused: nothing recorded */
#define PARMON_E_TOO_LARGE 2 /* payload larger than PARMON_TRACE_DATA_MAX */
#define PARMON_E_DROPPED 3   /* buffer full (--overflow drop): counted as lost */
#define PARMON_E_INVALID 4   /* bad argument (null pointer with non-zero size, ...) */

typedef uint32_t parmon_id;

/* 1 when this process is being recorded and recording is not paused, else 0. */
int parmon_is_active(void);

/* Regions: register a name once, then enter and leave by id. Regions nest. */
parmon_id parmon_region_register(const char* name);
void parmon_region_enter(parmon_id region);
void parmon_region_leave(parmon_id region);

/* Cedar-style events: an event id chosen by the program, optionally with data. */
void parmon_event_name(uint32_t event_id, const char* name);
void parmon_trace_event(uint32_t event_id);
int parmon_trace_data(uint32_t event_id, const void* data, size_t size);

/* Counters: a named value sampled whenever the program sets it. */
parmon_id parmon_counter_register(const char* name);
void parmon_counter_int(parmon_id counter, int64_t value);
void parmon_counter_double(parmon_id counter, double value);

/* Instant markers with a registered name ("checkpoint written", "phase 2"). */
parmon_id parmon_marker_register(const char* name);
void parmon_marker(parmon_id marker);

/* Naming of the calling thread and of this process, shown in reports. */
void parmon_thread_name(const char* name);
void parmon_process_name(const char* name);

/* Pause and resume recording for this whole process (the Mach monitor's suspend/resume).
 * While paused every call is a no-op; the trace marks the paused interval. */
void parmon_pause(void);
void parmon_resume(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PARMON_PARMON_H_ */
