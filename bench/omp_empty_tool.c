/* omp_empty_tool: an OMPT tool that registers the callbacks libparmon_omp registers and does
 * nothing in them. bench/omp_bench.sh preloads it to measure what libomp's tool path costs by
 * itself (the floor under any OMPT tool), next to the plain program and to `parmon record`. */
#include <omp-tools.h>
#include <stddef.h>

static void OnThreadBegin(ompt_thread_t type, ompt_data_t* thread) {
  (void)type;
  (void)thread;
}
static void OnThreadEnd(ompt_data_t* thread) {
  (void)thread;
}
static void OnParallelBegin(ompt_data_t* task,
                            const ompt_frame_t* frame,
                            ompt_data_t* parallel,
                            unsigned int requested,
                            int flags,
                            const void* codeptr) {
  (void)task, (void)frame, (void)parallel, (void)requested, (void)flags, (void)codeptr;
}
static void OnParallelEnd(ompt_data_t* parallel,
                          ompt_data_t* task,
                          int flags,
                          const void* codeptr) {
  (void)parallel, (void)task, (void)flags, (void)codeptr;
}
static void OnImplicitTask(ompt_scope_endpoint_t endpoint,
                           ompt_data_t* parallel,
                           ompt_data_t* task,
                           unsigned int team,
                           unsigned int index,
                           int flags) {
  (void)endpoint, (void)parallel, (void)task, (void)team, (void)index, (void)flags;
}
static void OnSyncRegionWait(ompt_sync_region_t kind,
                             ompt_scope_endpoint_t endpoint,
                             ompt_data_t* parallel,
                             ompt_data_t* task,
                             const void* codeptr) {
  (void)kind, (void)endpoint, (void)parallel, (void)task, (void)codeptr;
}
static void OnWork(ompt_work_t wstype,
                   ompt_scope_endpoint_t endpoint,
                   ompt_data_t* parallel,
                   ompt_data_t* task,
                   uint64_t count,
                   const void* codeptr) {
  (void)wstype, (void)endpoint, (void)parallel, (void)task, (void)count, (void)codeptr;
}
static void OnMutexAcquire(ompt_mutex_t kind,
                           unsigned int hint,
                           unsigned int impl,
                           ompt_wait_id_t wait_id,
                           const void* codeptr) {
  (void)kind, (void)hint, (void)impl, (void)wait_id, (void)codeptr;
}
static void OnMutexAcquired(ompt_mutex_t kind, ompt_wait_id_t wait_id, const void* codeptr) {
  (void)kind, (void)wait_id, (void)codeptr;
}
static void OnTaskCreate(ompt_data_t* parent,
                         const ompt_frame_t* frame,
                         ompt_data_t* task,
                         int flags,
                         int has_dependences,
                         const void* codeptr) {
  (void)parent, (void)frame, (void)task, (void)flags, (void)has_dependences, (void)codeptr;
}
static void OnTaskSchedule(ompt_data_t* prior, ompt_task_status_t status, ompt_data_t* next) {
  (void)prior, (void)status, (void)next;
}

static int Initialize(ompt_function_lookup_t lookup, int device, ompt_data_t* data) {
  (void)device, (void)data;
  ompt_set_callback_t set = (ompt_set_callback_t)lookup("ompt_set_callback");
  if (set == NULL)
    return 0;
  set(ompt_callback_thread_begin, (ompt_callback_t)OnThreadBegin);
  set(ompt_callback_thread_end, (ompt_callback_t)OnThreadEnd);
  set(ompt_callback_parallel_begin, (ompt_callback_t)OnParallelBegin);
  set(ompt_callback_parallel_end, (ompt_callback_t)OnParallelEnd);
  set(ompt_callback_implicit_task, (ompt_callback_t)OnImplicitTask);
  set(ompt_callback_sync_region_wait, (ompt_callback_t)OnSyncRegionWait);
  set(ompt_callback_work, (ompt_callback_t)OnWork);
  set(ompt_callback_mutex_acquire, (ompt_callback_t)OnMutexAcquire);
  set(ompt_callback_mutex_acquired, (ompt_callback_t)OnMutexAcquired);
  set(ompt_callback_task_create, (ompt_callback_t)OnTaskCreate);
  set(ompt_callback_task_schedule, (ompt_callback_t)OnTaskSchedule);
  return 1;
}

static void Finalize(ompt_data_t* data) {
  (void)data;
}

ompt_start_tool_result_t* ompt_start_tool(unsigned int omp_version, const char* runtime_version) {
  static ompt_start_tool_result_t result = {&Initialize, &Finalize, {0}};
  (void)omp_version, (void)runtime_version;
  return &result;
}
