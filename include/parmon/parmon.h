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

#define PARMON_API_VERSION \
  4 /* 2: self-monitoring (parmon_monitor_*); 3: parmon_monitor_watch_pid; 4: parmon_matrix */

/* Largest payload parmon_trace_data accepts, in bytes. Larger payloads are refused with
 * PARMON_E_TOO_LARGE; nothing is ever truncated. */
#define PARMON_TRACE_DATA_MAX 32768

/* Return codes. */
#define PARMON_OK 0
#define PARMON_E_INACTIVE 1     /* not running under parmon, or paused: nothing recorded */
#define PARMON_E_TOO_LARGE 2    /* payload larger than PARMON_TRACE_DATA_MAX */
#define PARMON_E_DROPPED 3      /* buffer full (--overflow drop): counted as lost */
#define PARMON_E_INVALID 4      /* bad argument (null pointer with non-zero size, ...) */
#define PARMON_E_NOT_RECORDED 5 /* self-monitoring: not run under `parmon record` (no session) */
#define PARMON_E_FULL 6 /* self-monitoring: the session's table of watched threads is full */

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

/* Matrices (docs/events.md, MatrixData): register a name once, then record the matrix's elements
 * whenever the program wants them seen, e.g. every iteration; `parmon view` shows each as a colour
 * map stepped through its calls (docs/web.md). Every call is one step, numbered from 0 per matrix
 * and process; calls made while not recorded or paused are counted too, so a step is the
 * program's own call number.
 *
 * parmon_matrix takes rows x cols elements of `type` in row-major order (C: data[r * cols + c]);
 * parmon_matrix_colmajor takes them column-major (Fortran: data[c * rows + r]), shown the same
 * way. The elements are copied raw, never converted or decimated: a matrix larger than one event
 * (PARMON_TRACE_DATA_MAX bytes) is cut into parts of that size, one event each, all with the
 * call's time. The call returns once every part is in the thread's ring.
 *
 * Returns PARMON_OK; PARMON_E_INACTIVE when not recorded or paused (nothing recorded);
 * PARMON_E_INVALID for an unknown type, zero rows or cols, or null data; PARMON_E_TOO_LARGE when
 * rows * cols * element size exceeds PARMON_MATRIX_MAX_BYTES (nothing recorded); PARMON_E_DROPPED
 * when `--overflow drop` lost at least one part: the step is in the trace without those elements
 * (the lost events are counted as any), and readers show it as incomplete. Under the default
 * `--overflow block` nothing is lost: the call waits for room in the ring. */
typedef enum parmon_elem_type {
  PARMON_INT32 = 1,
  PARMON_INT64 = 2,
  PARMON_FLOAT = 3,
  PARMON_DOUBLE = 4
} parmon_elem_type;
#define PARMON_MATRIX_MAX_BYTES (1u << 28) /* 256 MiB per call */
parmon_id parmon_matrix_register(const char* name);
int parmon_matrix(parmon_id matrix,
                  parmon_elem_type type,
                  uint32_t rows,
                  uint32_t cols,
                  const void* data);
int parmon_matrix_colmajor(parmon_id matrix,
                           parmon_elem_type type,
                           uint32_t rows,
                           uint32_t cols,
                           const void* data);

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

/* ---- Self-monitoring (docs/selfmon.md) ---------------------------------------------------------
 *
 * A program names the threads it wants watched and reads back, for the last sampler interval or
 * for the time since its previous read, how the recorder booked each one: running, queued for a
 * CPU, and blocked in communication, locks, timers, I/O or other waits; its CPU time; its
 * utilisation (running / elapsed) and the busy fraction of the CPU it last ran on. These are the
 * figures of the trace's ThreadStates events, which `parmon report` sums: the recorder's /proc
 * sampler (with the context-switch records) publishes them into the session's shared memory after
 * every pass (`parmon record -t`, 10 ms by default), and a read copies them under a sequence lock
 * -- no system call, no lock, about 0.5 us for 64 threads (bench/monitor_bench.sh).
 *
 * Run without `parmon record`, parmon_monitor_open returns PARMON_E_NOT_RECORDED (there is no
 * in-process fallback: see docs/selfmon.md). A monitor is used by one thread at a time.
 *
 *   parmon_monitor* m;
 *   if (parmon_monitor_open(&m) == PARMON_OK) {
 *     parmon_monitor_watch(m, worker_tid[0], NULL);            (a tid from parmon_thread_id())
 *     ...
 *     parmon_thread_figures f[NWORKERS];
 *     int n = parmon_monitor_read(m, PARMON_SINCE_LAST_READ, f, NWORKERS);
 *     ... f[i].states_ns[PARMON_STATE_RUNNING] / (double)f[i].elapsed_ns ...
 *     parmon_monitor_close(m);
 *   }
 */

/* The states of parmon_thread_figures.states_ns, in the order of `parmon report`. */
#define PARMON_STATE_RUNNING 0 /* on a CPU */
#define PARMON_STATE_QUEUED 1  /* runnable, waiting for a CPU */
#define PARMON_STATE_COMM 2    /* blocked on a message, pipe, socket */
#define PARMON_STATE_LOCK 3    /* blocked on a mutex, condition variable, barrier, join */
#define PARMON_STATE_TIMER 4   /* sleeping */
#define PARMON_STATE_IO 5      /* blocked on disk I/O */
#define PARMON_STATE_OTHER 6   /* stopped, other waits */
#define PARMON_STATE_COUNT 7

/* parmon_monitor_watch: the calling thread / every thread of this process (an MPI rank's). */
#define PARMON_SELF 0
#define PARMON_PROCESS (-1)

/* parmon_monitor_read: figures since this monitor's previous read (the first read: since the
 * thread was watched), or of the sampler's latest interval alone. */
#define PARMON_SINCE_LAST_READ 0
#define PARMON_LAST_INTERVAL 1

/* parmon_thread_figures.flags: NONE, nothing booked for it in the span (not seen by the sampler
 * yet, or no pass since the previous read); EXITED, the thread (for PARMON_PROCESS: the process)
 * has ended. */
#define PARMON_FIGURES_NONE 1
#define PARMON_FIGURES_EXITED 2

typedef struct parmon_monitor parmon_monitor;

typedef struct parmon_thread_figures {
  int32_t tid;                            /* the thread's kernel id (0: the whole process) */
  int32_t cpu;                            /* the CPU it was last seen on, -1 unknown */
  uint32_t flags;                         /* PARMON_FIGURES_* */
  uint32_t threads;                       /* threads booked (1, or a process's count) */
  uint64_t start_ns, end_ns;              /* the span covered, session clock ns (as trace times) */
  uint64_t elapsed_ns;                    /* end_ns - start_ns */
  uint64_t states_ns[PARMON_STATE_COUNT]; /* time per state over the span; they add up to
                                             elapsed_ns per thread */
  uint64_t cpu_ns;    /* CPU time over the span (running, reconciled with the kernel's CPU clock) */
  double utilisation; /* running / elapsed (a process: in CPUs) */
  double cpu_busy;    /* busy fraction of the CPU it last ran on over about the span; -1 unknown */
} parmon_thread_figures;

/* The calling thread's kernel thread id (gettid), to hand to the thread that watches it. */
int32_t parmon_thread_id(void);

/* Opens a monitor. PARMON_E_NOT_RECORDED when not run under parmon record; PARMON_E_INVALID for
 * a null pointer. */
int parmon_monitor_open(parmon_monitor** monitor);
/* Watches a thread of this process: a tid, PARMON_SELF or PARMON_PROCESS. Stores its index in
 * the order of parmon_monitor_read's output in *index (may be null). PARMON_E_FULL when the
 * session watches kMonitorEntries (256) threads already or this monitor 256. */
int parmon_monitor_watch(parmon_monitor* monitor, int32_t tid, int* index);
/* Watches a thread of another process of the same session: another MPI rank started under the
 * same `parmon record -- mpirun ...` (one recorder for all ranks), named by its pid (exchanged by
 * the program, e.g. with MPI_Allgather of getpid()) and a tid of it, or PARMON_PROCESS for all
 * its threads (a process's main thread has tid == pid). pid 0 or the caller's own: as
 * parmon_monitor_watch. PARMON_E_INVALID when no thread of pid has written to this session, as
 * for a rank of another recorder (`mpirun ... parmon record`: one recorder per rank). */
int parmon_monitor_watch_pid(parmon_monitor* monitor, int32_t pid, int32_t tid, int* index);
/* Fills out[0..min(n, watched)) in watch order and returns how many, or -PARMON_E_* on error.
 * `what`: PARMON_SINCE_LAST_READ or PARMON_LAST_INTERVAL. */
int parmon_monitor_read(parmon_monitor* monitor, int what, parmon_thread_figures* out, int n);
/* Stops watching and frees the monitor. */
void parmon_monitor_close(parmon_monitor* monitor);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PARMON_PARMON_H_ */
