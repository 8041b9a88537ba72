// libparmon_pthread: waits on thread synchronisation, recorded as SyncWait/SyncSignal events
// (docs/events.md): mutexes, spinlocks, rwlocks, condition variables, barriers, joins and
// semaphores; and the names threads give themselves (pthread_setname_np, prctl PR_SET_NAME).
// Loaded with LD_PRELOAD by `parmon record` next to libparmon_posix.
//
// What costs what: a lock that is free costs its try-lock and nothing else (no event, not even
// a timestamp): the wrapper first calls the real try-lock, and only when the lock is busy takes
// the time, calls the real blocking lock and writes one SyncWait with the time it waited. A
// try-lock that succeeds is exactly what the blocking lock would have done (the same owner and
// count for recursive mutexes, the same EOWNERDEAD for robust ones); any answer other than
// "busy" is returned as the lock's own. Condition waits, barriers, joins and semaphore waits
// always block or may, so each writes one SyncWait; signals and broadcasts write a SyncSignal.
//
// As in libparmon_posix, the guard is not held across the real call, so a thread cancelled
// inside pthread_cond_wait or pthread_join (cancellation points) runs its cleanup handlers with
// the wrappers working normally; errno is restored after recording. When recording is off or
// paused, every wrapper is one relaxed load and a branch in front of the real function.
//
// glibc keeps two versions of the condition variable functions; dlsym would hand us the old
// (GLIBC_2.2.5) ones, so they are looked up with dlvsym at the version programs link against.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <time.h>

#include <atomic>
#include <cstring>

#include "parmon/parmon.h"
#include "preload/common/preload.h"

namespace parmon::preload {
// One guard for all of parmon's preload libraries (see mpi_core.cc).
__attribute__((weak, visibility("default"))) __thread int t_in_wrapper
    __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace parmon::preload

namespace parmon::preload::sync {
namespace {

using format::Kind;

#define PARMON_REAL_COND(name) PARMON_REAL_VERSION(name, "GLIBC_2.3.2")

enum SyncType : uint64_t {
  kMutex = 1,
  kRwRead = 2,
  kRwWrite = 3,
  kCond = 4,
  kBarrier = 5,
  kJoin = 6,
  kSemaphore = 7,
  kBroadcast = 8,
  kSpin = 9
};

inline bool On() {
  return t_in_wrapper == 0 && Enabled();
}

void RecordWait(const void* object, SyncType type, uint64_t begin, int result) {
  int saved = errno;
  t_in_wrapper = 1;
  uint64_t a[4] = {reinterpret_cast<uintptr_t>(object), type, begin,
                   static_cast<uint64_t>(static_cast<int64_t>(result))};
  parmon_x_emit(K(Kind::kSyncWait), a, 4, nullptr, 0);
  t_in_wrapper = 0;
  errno = saved;
}

void RecordSignal(const void* object, SyncType type) {
  int saved = errno;
  t_in_wrapper = 1;
  uint64_t a[2] = {reinterpret_cast<uintptr_t>(object), type};
  parmon_x_emit(K(Kind::kSyncSignal), a, 2, nullptr, 0);
  t_in_wrapper = 0;
  errno = saved;
}

}  // namespace
}  // namespace parmon::preload::sync

namespace ps = parmon::preload::sync;

// A lock: try first; only a busy lock is timed and recorded.
#define PARMON_LOCK(type, object, try_call, call) \
  if (!ps::On())                                  \
    return call;                                  \
  int rc = try_call;                              \
  if (rc != EBUSY)                                \
    return rc;                                    \
  uint64_t begin = parmon_x_now();                \
  rc = call;                                      \
  ps::RecordWait(object, ps::type, begin, rc);    \
  return rc

// A wait that may always block: timed and recorded.
#define PARMON_WAIT(type, object, call)        \
  if (!ps::On())                               \
    return call;                               \
  uint64_t begin = parmon_x_now();             \
  int rc = call;                               \
  ps::RecordWait(object, ps::type, begin, rc); \
  return rc

PARMON_INTERPOSE int pthread_mutex_lock(pthread_mutex_t* m) {
  PARMON_LOCK(kMutex, m, PARMON_REAL(pthread_mutex_trylock)(m), PARMON_REAL(pthread_mutex_lock)(m));
}
PARMON_INTERPOSE int pthread_mutex_timedlock(pthread_mutex_t* m, const timespec* t) {
  PARMON_LOCK(kMutex, m, PARMON_REAL(pthread_mutex_trylock)(m),
              PARMON_REAL(pthread_mutex_timedlock)(m, t));
}
// A spinlock: the try-lock first, as for a mutex; a busy one is timed from the failed try until
// the real lock returns. The thread runs (spins) meanwhile, yet the time is a lock wait: the
// report books it so, not as computation.
PARMON_INTERPOSE int pthread_spin_lock(pthread_spinlock_t* l) {
  PARMON_LOCK(kSpin, const_cast<int*>(l), PARMON_REAL(pthread_spin_trylock)(l),
              PARMON_REAL(pthread_spin_lock)(l));
}
PARMON_INTERPOSE int pthread_rwlock_rdlock(pthread_rwlock_t* l) {
  PARMON_LOCK(kRwRead, l, PARMON_REAL(pthread_rwlock_tryrdlock)(l),
              PARMON_REAL(pthread_rwlock_rdlock)(l));
}
PARMON_INTERPOSE int pthread_rwlock_wrlock(pthread_rwlock_t* l) {
  PARMON_LOCK(kRwWrite, l, PARMON_REAL(pthread_rwlock_trywrlock)(l),
              PARMON_REAL(pthread_rwlock_wrlock)(l));
}
PARMON_INTERPOSE int pthread_rwlock_timedrdlock(pthread_rwlock_t* l, const timespec* t) {
  PARMON_LOCK(kRwRead, l, PARMON_REAL(pthread_rwlock_tryrdlock)(l),
              PARMON_REAL(pthread_rwlock_timedrdlock)(l, t));
}
PARMON_INTERPOSE int pthread_rwlock_timedwrlock(pthread_rwlock_t* l, const timespec* t) {
  PARMON_LOCK(kRwWrite, l, PARMON_REAL(pthread_rwlock_trywrlock)(l),
              PARMON_REAL(pthread_rwlock_timedwrlock)(l, t));
}

PARMON_INTERPOSE int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  PARMON_WAIT(kCond, c, PARMON_REAL_COND(pthread_cond_wait)(c, m));
}
PARMON_INTERPOSE int pthread_cond_timedwait(pthread_cond_t* c,
                                            pthread_mutex_t* m,
                                            const timespec* t) {
  PARMON_WAIT(kCond, c, PARMON_REAL_COND(pthread_cond_timedwait)(c, m, t));
}
PARMON_INTERPOSE int pthread_cond_clockwait(pthread_cond_t* c,
                                            pthread_mutex_t* m,
                                            clockid_t clock,
                                            const timespec* t) {
  PARMON_WAIT(kCond, c, PARMON_REAL(pthread_cond_clockwait)(c, m, clock, t));
}
PARMON_INTERPOSE int pthread_cond_signal(pthread_cond_t* c) {
  if (!ps::On())
    return PARMON_REAL_COND(pthread_cond_signal)(c);
  int rc = PARMON_REAL_COND(pthread_cond_signal)(c);
  ps::RecordSignal(c, ps::kCond);
  return rc;
}
PARMON_INTERPOSE int pthread_cond_broadcast(pthread_cond_t* c) {
  if (!ps::On())
    return PARMON_REAL_COND(pthread_cond_broadcast)(c);
  int rc = PARMON_REAL_COND(pthread_cond_broadcast)(c);
  ps::RecordSignal(c, ps::kBroadcast);
  return rc;
}

PARMON_INTERPOSE int pthread_barrier_wait(pthread_barrier_t* b) {
  PARMON_WAIT(kBarrier, b, PARMON_REAL(pthread_barrier_wait)(b));
}
PARMON_INTERPOSE int pthread_join(pthread_t t, void** value) {
  PARMON_WAIT(kJoin, reinterpret_cast<const void*>(t), PARMON_REAL(pthread_join)(t, value));
}

// Semaphores report failure through errno: the result recorded is 0 or the errno.
PARMON_INTERPOSE int sem_wait(sem_t* s) {
  if (!ps::On())
    return PARMON_REAL(sem_wait)(s);
  int saved = errno;  // the try's EAGAIN must not leak into a wait that succeeds
  int rc = PARMON_REAL(sem_trywait)(s);
  if (rc == 0 || errno != EAGAIN)
    return rc;
  errno = saved;
  uint64_t begin = parmon_x_now();
  rc = PARMON_REAL(sem_wait)(s);
  ps::RecordWait(s, ps::kSemaphore, begin, rc == 0 ? 0 : errno);
  return rc;
}
PARMON_INTERPOSE int sem_timedwait(sem_t* s, const timespec* t) {
  if (!ps::On())
    return PARMON_REAL(sem_timedwait)(s, t);
  int saved = errno;
  int rc = PARMON_REAL(sem_trywait)(s);
  if (rc == 0 || errno != EAGAIN)
    return rc;
  errno = saved;
  uint64_t begin = parmon_x_now();
  rc = PARMON_REAL(sem_timedwait)(s, t);
  ps::RecordWait(s, ps::kSemaphore, begin, rc == 0 ? 0 : errno);
  return rc;
}

// Thread names. The kernel's name of a thread that names itself is read by the sampler only now
// and then (every kStatEvery passes when it runs) and, without context-switch records, a thread
// that renames itself and ends within a few passes would keep its old name in the trace. The
// name it gives itself is announced at once (parmon_thread_name), cut as the kernel cuts it.
// A name given to another thread is left to the sampler: its thread id is not known here.
namespace parmon::preload::sync {
namespace {
constexpr size_t kKernelNameMax = 15;  // TASK_COMM_LEN - 1

void AnnounceOwnName(const char* name) {
  char cut[kKernelNameMax + 1] = {};
  std::strncpy(cut, name, kKernelNameMax);
  int saved = errno;
  t_in_wrapper = 1;
  parmon_thread_name(cut);
  t_in_wrapper = 0;
  errno = saved;
}
}  // namespace
}  // namespace parmon::preload::sync

PARMON_INTERPOSE int pthread_setname_np(pthread_t t, const char* name) {
  int rc = PARMON_REAL(pthread_setname_np)(t, name);
  if (rc == 0 && ps::On() && pthread_equal(t, pthread_self()))
    ps::AnnounceOwnName(name);
  return rc;
}

// prctl is variadic; every option takes at most four more unsigned long arguments, which are
// passed on as they came.
PARMON_INTERPOSE int prctl(int option, ...) {
  va_list ap;
  va_start(ap, option);
  unsigned long a2 = va_arg(ap, unsigned long);
  unsigned long a3 = va_arg(ap, unsigned long);
  unsigned long a4 = va_arg(ap, unsigned long);
  unsigned long a5 = va_arg(ap, unsigned long);
  va_end(ap);
  int rc = PARMON_REAL(prctl)(option, a2, a3, a4, a5);
  if (rc == 0 && option == PR_SET_NAME && a2 != 0 && ps::On())
    ps::AnnounceOwnName(reinterpret_cast<const char*>(a2));
  return rc;
}
