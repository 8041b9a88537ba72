// Shared pieces of parmon's preload libraries (MPI, POSIX channels, pthread sync).
//
// Every interposed function follows the same pattern:
//   - One cheap check first: Enabled() (a relaxed load of libparmon's flag, in place) and this
//   thread's
//     reentrancy guard. When recording is off or paused, the wrapper calls the real function and
//     nothing else, so a paused session costs a load and a branch.
//   - The guard (a thread-local flag, initial-exec TLS so reading it never allocates or locks) is
//     set while the wrapper runs its own code, so functions the wrapper or libparmon call
//     internally are passed straight through instead of being recorded twice or recursing.
//   - errno is saved after the real call and restored before returning: recording never changes
//     what the program sees (errno, return values, cancellation points).
// Symbols are hidden except the interposed functions themselves.
#ifndef PARMON_SRC_PRELOAD_COMMON_PRELOAD_H_
#define PARMON_SRC_PRELOAD_COMMON_PRELOAD_H_

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>

#include "format/kinds.h"
#include "runtime/emit.h"

#define PARMON_INTERPOSE extern "C" __attribute__((visibility("default")))

namespace parmon::preload {

// Set while a wrapper of this thread is running its own code.
extern __thread int t_in_wrapper __attribute__((tls_model("initial-exec")));

// libparmon's enabled flag, read where it lives: a paused wrapper then costs the interposed call,
// these loads and the call of the real function (bench/comm_bench.cc measures it). Its address
// is fetched on first use, not by a static initialiser: other libraries' constructors (the MPI's,
// libgfortran's) call wrapped functions before a preloaded library's own initialisers run.
inline const int* g_enabled_flag = nullptr;  // relaxed: every thread stores the same address
inline bool Enabled() {
  const int* flag = __atomic_load_n(&g_enabled_flag, __ATOMIC_RELAXED);
  if (flag == nullptr) [[unlikely]] {
    flag = parmon_x_enabled_flag();
    __atomic_store_n(&g_enabled_flag, flag, __ATOMIC_RELAXED);
  }
  return __atomic_load_n(flag, __ATOMIC_RELAXED) != 0;
}

// Holds the guard for one wrapper invocation. active() is false when the wrapper must only pass
// the call through (not recording, or already inside a wrapper).
class Guard {
 public:
  Guard() : active_(t_in_wrapper == 0 && Enabled()) {
    if (active_)
      t_in_wrapper = 1;
  }
  ~Guard() {
    if (active_)
      t_in_wrapper = 0;
  }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;
  bool active() const { return active_; }

 private:
  bool active_;
};

inline uint16_t K(format::Kind k) {
  return static_cast<uint16_t>(k);
}

// The id of a function name (DefString category kFunction), interned on first use and cached
// in *slot. Relaxed atomics: two threads racing intern the same name and get the same id.
inline uint32_t FunctionId(uint32_t* slot, const char* name) {
  uint32_t id = __atomic_load_n(slot, __ATOMIC_RELAXED);
  if (id == 0) [[unlikely]] {
    id = parmon_x_intern(name, static_cast<uint32_t>(format::StringCategory::kFunction));
    __atomic_store_n(slot, id, __ATOMIC_RELAXED);
  }
  return id;
}

// The id of a code address as a call site (DefString category kCallSite): "0x<offset> <module
// path>", the offset from where its module was loaded, which the report resolves to file and
// line (analysis/call_sites.h). 0 when dladdr knows no module for it. Interned: callers cache it.
[[gnu::cold]] inline uint32_t InternCodeAddress(const void* pc) {
  Dl_info info{};
  if (pc == nullptr || dladdr(pc, &info) == 0 || info.dli_fbase == nullptr)
    return 0;
  char exe[PATH_MAX];
  const char* module = info.dli_fname ? info.dli_fname : "";
  if (module[0] != '/') {  // the executable, named as it was started: take the kernel's path
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
      return 0;
    exe[n] = 0;
    module = exe;
  }
  char name[PATH_MAX + 32];
  snprintf(name, sizeof name, "0x%lx %s",
           static_cast<unsigned long>(reinterpret_cast<uintptr_t>(pc) -
                                      reinterpret_cast<uintptr_t>(info.dli_fbase)),
           module);
  return parmon_x_intern(name, static_cast<uint32_t>(format::StringCategory::kCallSite));
}

// The real function: the next definition of `name` after this library, looked up on first use
// and cached in *slot (relaxed: racing threads find the same address). `version` picks a symbol
// version (dlvsym) for functions glibc keeps in several versions. errno is left as it was.
template <typename F>
F RealFunction(std::atomic<void*>& slot, const char* name, const char* version = nullptr) {
  void* p = slot.load(std::memory_order_relaxed);
  if (p == nullptr) [[unlikely]] {
    int saved = errno;
    if (version != nullptr)
      p = dlvsym(RTLD_NEXT, name, version);
    if (p == nullptr)
      p = dlsym(RTLD_NEXT, name);
    errno = saved;
    slot.store(p, std::memory_order_relaxed);
  }
  return reinterpret_cast<F>(p);
}

}  // namespace parmon::preload

// The real `name` (a function declared by a system header), for use inside its wrapper.
#define PARMON_REAL_VERSION(name, version)                                           \
  ([]() {                                                                            \
    static std::atomic<void*> slot{nullptr};                                         \
    return ::parmon::preload::RealFunction<decltype(&::name)>(slot, #name, version); \
  }())
#define PARMON_REAL(name) PARMON_REAL_VERSION(name, nullptr)

#endif  // PARMON_SRC_PRELOAD_COMMON_PRELOAD_H_
