// libparmon_omp: parmon's OMPT tool. `parmon record` preloads it next to the other preload
// families; an OpenMP runtime with OMPT (LLVM's libomp) finds its ompt_start_tool and calls back
// on every parallel region, implicit task, barrier wait, worksharing construct, lock wait and
// explicit task. Each callback writes an event through libparmon's emit path (runtime/emit.h) on
// the calling thread's own ring, so OpenMP events share the clock, the rings and the loss
// accounting of every other event (docs/openmp.md, kinds 34-41 in format/kinds.h).
//
// What costs what: a span (implicit task, barrier wait, loop, lock wait, task) is one event
// written at its end with its begin time as an argument, so a region costs one event per thread
// plus one on its master (with the implicit barrier that closes it, two per thread), and a
// barrier one event per thread. A region whose team is one thread (num_threads(1), `if(0)`, a
// nested region without nesting) is one OmpSoloRegion and nothing else: its implicit task is the
// region itself on the same thread, and its barriers wait for no one, so the tool neither reads
// the clock for them nor writes them (docs/openmp.md). The begin times live in small
// thread-local stacks, not in OMPT's data slots, because libomp hands a null parallel_data to
// the end callbacks of implicit tasks and of the barrier that closes a region. A parallel
// region's id is the process-wide count of regions begun, kept in its parallel_data.
//
// GCC 12's libgomp has no OMPT: it never calls ompt_start_tool. The library's constructor
// notices a program whose GOMP_* entry points resolve to libgomp and writes one OmpRuntime event
// with ompt = 0, so the report can say why there are no OpenMP regions instead of showing none.
#include <dlfcn.h>
#include <limits.h>
#include <omp-tools.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "preload/common/preload.h"

namespace parmon::preload {
// One guard for all of parmon's preload libraries (see mpi_core.cc).
__attribute__((weak, visibility("default"))) __thread int t_in_wrapper
    __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace parmon::preload

namespace parmon::omp {
namespace {

using format::Kind;
using preload::Enabled;
using preload::K;

constexpr int kDepth = 16;  // nesting kept per thread; deeper spans are not recorded

// A thread's open spans: implicit tasks (with their region) and regions it began. `solo`: the
// team is this thread alone (an implicit task's span, or the region it belongs to).
struct Span {
  uint64_t region;
  uint64_t begin;
  uint32_t index;  // an implicit task's thread number; a region's construct name id
  uint32_t team;
  bool solo;
};
// Begin times of nested spans of one kind (waits, worksharing constructs).
struct BeginStack {
  uint64_t begins[kDepth];
  int depth;
  void Push() {
    if (depth < kDepth)
      begins[depth] = parmon_x_now();
    ++depth;
  }
  // The begin of the span that ends now; false when it was not kept (or none was open).
  bool Pop(uint64_t* begin) {
    if (depth == 0)
      return false;
    --depth;
    *begin = depth < kDepth ? begins[depth] : 0;
    return depth < kDepth;
  }
};
struct ThreadSpans {
  Span tasks[kDepth];
  int task_depth;
  Span parallels[kDepth];  // regions this thread began (index: the construct's name id)
  int parallel_depth;
  BeginStack waits;
  BeginStack works;
  uint64_t mutex_begin;
  uint64_t task_begin;        // the explicit task this thread runs now (0: none)
  const void* construct_key;  // the last construct named on this thread, and its id
  uint32_t construct_id;
};
__thread ThreadSpans t_spans __attribute__((tls_model("initial-exec")));

std::atomic<uint64_t> g_next_region{1};

void Emit(uint64_t now, Kind kind, const uint64_t* args, unsigned n) {
  parmon_x_emit_at(now, K(kind), args, n, nullptr, 0);
}

uint64_t CurrentRegion() {
  int d = t_spans.task_depth;
  return d > 0 && d <= kDepth ? t_spans.tasks[d - 1].region : 0;
}

// Whether this thread's innermost implicit task has a team of one.
bool InSoloTask() {
  int d = t_spans.task_depth;
  return d > 0 && d <= kDepth && t_spans.tasks[d - 1].solo;
}

// The barrier kinds of ompt_sync_region_t (1-4, 8-10): in a team of one they wait for no one.
bool IsBarrier(ompt_sync_region_t kind) {
  return kind <= ompt_sync_region_barrier_implementation ||
         (kind >= ompt_sync_region_barrier_implicit_workshare &&
          kind <= ompt_sync_region_barrier_teams);
}

// The name of a construct: its return address as "0x<offset> <module path>" (a call site,
// resolved by the report to file, line and function: analysis/call_sites.h), interned once per
// address. The thread's last one is kept in its (initial-exec) spans: a region begun again from
// the same place costs a compare.
uint32_t ConstructId(const void* codeptr) {
  constexpr int kSlots = 256;
  static std::mutex mu;
  static const void* keys[kSlots];
  static uint32_t ids[kSlots];
  ThreadSpans& s = t_spans;
  if (codeptr == s.construct_key) [[likely]]
    return s.construct_id;
  if (codeptr == nullptr)
    return 0;
  std::lock_guard<std::mutex> lock(mu);
  size_t slot = (reinterpret_cast<uintptr_t>(codeptr) >> 4) % kSlots;
  if (keys[slot] != codeptr) {
    keys[slot] = codeptr;
    ids[slot] = preload::InternCodeAddress(codeptr);
  }
  s.construct_key = codeptr;
  s.construct_id = ids[slot];
  return s.construct_id;
}

void OnThreadBegin(ompt_thread_t type, ompt_data_t* thread) {
  thread->value = static_cast<uint64_t>(type);
  if (!Enabled())
    return;
  uint64_t a[2] = {static_cast<uint64_t>(type), 1};
  Emit(parmon_x_now(), Kind::kOmpThread, a, 2);
}

// The initial thread's end comes from the runtime's exit handler, after libparmon has let go of
// the thread's ring (the event would only count as lost); its last region ends its span anyway.
void OnThreadEnd(ompt_data_t* thread) {
  if (thread->value == ompt_thread_initial || !Enabled())
    return;
  uint64_t a[2] = {0, 2};
  Emit(parmon_x_now(), Kind::kOmpThread, a, 2);
}

void OnParallelBegin(ompt_data_t*,
                     const ompt_frame_t*,
                     ompt_data_t* parallel,
                     unsigned int requested,
                     int,
                     const void* codeptr) {
  uint64_t id = g_next_region.fetch_add(1, std::memory_order_relaxed);
  parallel->value = id;
  ThreadSpans& s = t_spans;
  if (s.parallel_depth < kDepth)
    s.parallels[s.parallel_depth] = {id, parmon_x_now(), ConstructId(codeptr), requested, false};
  ++s.parallel_depth;
}

// One event per region, at its end on the thread that began it: OmpSoloRegion for a team of one
// (which stands for its implicit task too), else OmpParallel.
void OnParallelEnd(ompt_data_t*, ompt_data_t*, int, const void*) {
  ThreadSpans& s = t_spans;
  if (s.parallel_depth == 0)
    return;
  --s.parallel_depth;
  if (s.parallel_depth >= kDepth || !Enabled())
    return;
  const Span& p = s.parallels[s.parallel_depth];
  if (p.solo) {
    uint64_t a[3] = {p.region, p.index, p.begin};
    Emit(parmon_x_now(), Kind::kOmpSoloRegion, a, 3);
    return;
  }
  uint64_t a[4] = {p.region, p.team, p.index, p.begin};
  Emit(parmon_x_now(), Kind::kOmpParallel, a, 4);
}

void OnImplicitTask(ompt_scope_endpoint_t endpoint,
                    ompt_data_t* parallel,
                    ompt_data_t*,
                    unsigned int team,
                    unsigned int index,
                    int flags) {
  if (flags & ompt_task_initial)
    return;  // the initial thread's implicit task: the program itself, not a region
  ThreadSpans& s = t_spans;
  if (endpoint == ompt_scope_begin) {
    const uint64_t region = parallel ? parallel->value : 0;
    if (team == 1) {
      // A team of one: the region this thread began is the whole of it (OnParallelEnd writes
      // it); this span only marks the thread's waits as waiting for no one. No clock read.
      const int pd = s.parallel_depth;
      const bool mine = pd > 0 && pd <= kDepth && s.parallels[pd - 1].region == region;
      if (mine)
        s.parallels[pd - 1].solo = true;
      if (s.task_depth < kDepth)
        s.tasks[s.task_depth] = {region, mine ? 0 : parmon_x_now(), index, team, mine};
      ++s.task_depth;
      return;
    }
    if (s.task_depth < kDepth)
      s.tasks[s.task_depth] = {region, parmon_x_now(), index, team, false};
    ++s.task_depth;
    return;
  }
  if (s.task_depth == 0)
    return;
  --s.task_depth;
  if (s.task_depth >= kDepth || s.tasks[s.task_depth].solo || !Enabled())
    return;
  const Span& t = s.tasks[s.task_depth];
  uint64_t a[4] = {t.region, t.index, t.team, t.begin};
  Emit(parmon_x_now(), Kind::kOmpImplicitTask, a, 4);
}

void OnSyncRegionWait(ompt_sync_region_t kind,
                      ompt_scope_endpoint_t endpoint,
                      ompt_data_t*,
                      ompt_data_t*,
                      const void*) {
  if (IsBarrier(kind) && InSoloTask())
    return;  // a team of one's barrier: begin and end alike
  uint64_t begin = 0;
  if (endpoint == ompt_scope_begin) {
    t_spans.waits.Push();
    return;
  }
  if (!t_spans.waits.Pop(&begin) || !Enabled())
    return;
  uint64_t a[3] = {CurrentRegion(), static_cast<uint64_t>(kind), begin};
  Emit(parmon_x_now(), Kind::kOmpSyncWait, a, 3);
}

void OnWork(ompt_work_t wstype,
            ompt_scope_endpoint_t endpoint,
            ompt_data_t*,
            ompt_data_t*,
            uint64_t count,
            const void*) {
  uint64_t begin = 0;
  if (endpoint == ompt_scope_begin) {
    t_spans.works.Push();
    return;
  }
  if (!t_spans.works.Pop(&begin) || !Enabled())
    return;
  uint64_t a[4] = {CurrentRegion(), static_cast<uint64_t>(wstype), count, begin};
  Emit(parmon_x_now(), Kind::kOmpWork, a, 4);
}

void OnMutexAcquire(ompt_mutex_t, unsigned int, unsigned int, ompt_wait_id_t, const void*) {
  t_spans.mutex_begin = parmon_x_now();
}

void OnMutexAcquired(ompt_mutex_t kind, ompt_wait_id_t wait_id, const void*) {
  uint64_t begin = t_spans.mutex_begin;
  if (begin == 0 || !Enabled())
    return;
  t_spans.mutex_begin = 0;
  uint64_t a[3] = {static_cast<uint64_t>(kind), wait_id, begin};
  Emit(parmon_x_now(), Kind::kOmpMutexWait, a, 3);
}

// An explicit task runs on this thread from its switch-in to its switch-out or completion.
void OnTaskSchedule(ompt_data_t* prior, ompt_task_status_t status, ompt_data_t* next) {
  ThreadSpans& s = t_spans;
  uint64_t now = parmon_x_now();
  if (s.task_begin != 0 && prior != nullptr && Enabled()) {
    uint64_t a[2] = {CurrentRegion(), s.task_begin};
    Emit(now, Kind::kOmpTask, a, 2);
  }
  s.task_begin = 0;
  (void)status;
  if (next != nullptr && next->value == 1)
    s.task_begin = now;
}

// Marks explicit tasks (task_data->value = 1) so task_schedule knows which switches to time.
void OnTaskCreate(ompt_data_t*,
                  const ompt_frame_t*,
                  ompt_data_t* task,
                  int flags,
                  int,
                  const void*) {
  task->value = (flags & ompt_task_explicit) ? 1 : 0;
}

void EmitRuntime(uint64_t ompt, uint64_t version, const char* name) {
  if (!Enabled())
    return;
  uint64_t a[2] = {ompt, version};
  parmon_x_emit(K(Kind::kOmpRuntime), a, 2, name, static_cast<uint32_t>(strlen(name)));
}

const char* g_runtime_name = "";
unsigned g_runtime_version = 0;

int Initialize(ompt_function_lookup_t lookup, int, ompt_data_t*) {
  auto set = reinterpret_cast<ompt_set_callback_t>(lookup("ompt_set_callback"));
  if (set == nullptr)
    return 0;
  auto reg = [set](ompt_callbacks_t which, auto fn) {
    set(which, reinterpret_cast<ompt_callback_t>(fn));
  };
  reg(ompt_callback_thread_begin, &OnThreadBegin);
  reg(ompt_callback_thread_end, &OnThreadEnd);
  reg(ompt_callback_parallel_begin, &OnParallelBegin);
  reg(ompt_callback_parallel_end, &OnParallelEnd);
  reg(ompt_callback_implicit_task, &OnImplicitTask);
  reg(ompt_callback_sync_region_wait, &OnSyncRegionWait);
  reg(ompt_callback_work, &OnWork);
  reg(ompt_callback_mutex_acquire, &OnMutexAcquire);
  reg(ompt_callback_mutex_acquired, &OnMutexAcquired);
  reg(ompt_callback_task_create, &OnTaskCreate);
  reg(ompt_callback_task_schedule, &OnTaskSchedule);
  EmitRuntime(1, g_runtime_version, g_runtime_name);
  return 1;  // keep the tool
}

void Finalize(ompt_data_t*) {}

// GCC's libgomp: the program's GOMP_* entry points resolve to it and no OMPT runtime is loaded.
__attribute__((constructor)) void NoteLibgomp() {
  void* gomp = dlsym(RTLD_DEFAULT, "GOMP_parallel");
  if (gomp == nullptr || dlsym(RTLD_DEFAULT, "__kmpc_fork_call") != nullptr)
    return;
  Dl_info info{};
  if (dladdr(gomp, &info) != 0 && info.dli_fname != nullptr &&
      strstr(info.dli_fname, "libgomp") != nullptr)
    EmitRuntime(0, 0, "libgomp");
}

}  // namespace
}  // namespace parmon::omp

// The OMPT entry point (OpenMP 5.0 section 4.2.1): the runtime calls it once at start-up.
extern "C" __attribute__((visibility("default"))) ompt_start_tool_result_t* ompt_start_tool(
    unsigned int omp_version,
    const char* runtime_version) {
  static ompt_start_tool_result_t result = {&parmon::omp::Initialize, &parmon::omp::Finalize, {0}};
  parmon::omp::g_runtime_name = runtime_version != nullptr ? runtime_version : "";
  parmon::omp::g_runtime_version = omp_version;
  return &result;
}
