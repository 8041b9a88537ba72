// parmon.hpp -- C++ wrappers over the C interface in parmon.h: RAII region scopes, counters,
// matrices with their element type deduced, self-monitoring.
#ifndef PARMON_PARMON_HPP_
#define PARMON_PARMON_HPP_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "parmon/parmon.h"

namespace parmon {

// Registers a region name once and enters/leaves it by id.
class Region {
 public:
  explicit Region(const char* name) : id_(parmon_region_register(name)) {}
  parmon_id id() const { return id_; }
  void Enter() const { parmon_region_enter(id_); }
  void Leave() const { parmon_region_leave(id_); }

 private:
  parmon_id id_;
};

// Enters a region for the lifetime of the scope.
class Scope {
 public:
  explicit Scope(parmon_id region) : region_(region) { parmon_region_enter(region_); }
  explicit Scope(const Region& region) : Scope(region.id()) {}
  ~Scope() { parmon_region_leave(region_); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  parmon_id region_;
};

class Counter {
 public:
  explicit Counter(const char* name) : id_(parmon_counter_register(name)) {}
  void Set(int64_t value) const { parmon_counter_int(id_, value); }
  void SetDouble(double value) const { parmon_counter_double(id_, value); }

 private:
  parmon_id id_;
};

// The parmon_elem_type of a C++ element type (int32_t, int64_t, float, double); any other type
// does not compile.
template <typename T>
constexpr parmon_elem_type ElemTypeOf() {
  static_assert(std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
                    std::is_same_v<T, float> || std::is_same_v<T, double>,
                "parmon_matrix records int32_t, int64_t, float or double elements");
  return std::is_same_v<T, int32_t>   ? PARMON_INT32
         : std::is_same_v<T, int64_t> ? PARMON_INT64
         : std::is_same_v<T, float>   ? PARMON_FLOAT
                                      : PARMON_DOUBLE;
}

// A matrix recorded step by step (parmon_matrix in parmon.h: row-major, each call one step):
//   static const parmon::Matrix grid("temperature");
//   grid.Record(t.data(), rows, cols);    // T deduced: int32_t, int64_t, float or double
class Matrix {
 public:
  explicit Matrix(const char* name) : id_(parmon_matrix_register(name)) {}
  parmon_id id() const { return id_; }
  template <typename T>
  int Record(const T* data, uint32_t rows, uint32_t cols) const {
    return parmon_matrix(id_, ElemTypeOf<T>(), rows, cols, data);
  }
  // A vector of exactly rows * cols elements (else PARMON_E_INVALID, nothing recorded).
  template <typename T>
  int Record(const std::vector<T>& data, uint32_t rows, uint32_t cols) const {
    if (data.size() != uint64_t{rows} * cols)
      return PARMON_E_INVALID;
    return Record(data.data(), rows, cols);
  }

 private:
  parmon_id id_;
};

// Self-monitoring (parmon.h, docs/selfmon.md): watch threads, read how the recorder booked them.
//   parmon::Monitor m;                  // m.error(): PARMON_E_NOT_RECORDED when not recorded
//   m.Watch(worker_tid);                // a tid from parmon_thread_id(), PARMON_SELF or
//                                       // PARMON_PROCESS (this process / MPI rank, all threads)
//   for (const parmon_thread_figures& f : m.Read()) ...   // since the previous Read
// Copyable figures, no exceptions; one thread uses a Monitor at a time.
class Monitor {
 public:
  Monitor() : error_(parmon_monitor_open(&m_)) {}
  ~Monitor() { parmon_monitor_close(m_); }
  Monitor(const Monitor&) = delete;
  Monitor& operator=(const Monitor&) = delete;

  // PARMON_OK, or why the monitor cannot be used (every call then does nothing).
  int error() const { return error_; }
  bool ok() const { return error_ == PARMON_OK; }
  // The index of the thread in Read()'s output, or -PARMON_E_* .
  int Watch(int32_t tid = PARMON_SELF) { return WatchPid(0, tid); }
  // A thread (or PARMON_PROCESS: all threads) of another process of the session: an MPI rank
  // under the same `parmon record -- mpirun` (parmon_monitor_watch_pid).
  int WatchPid(int32_t pid, int32_t tid = PARMON_PROCESS) {
    if (!ok())
      return -error_;
    int index = -1;
    const int rc = pid == 0 ? parmon_monitor_watch(m_, tid, &index)
                            : parmon_monitor_watch_pid(m_, pid, tid, &index);
    if (rc != PARMON_OK)
      return -rc;
    figures_.resize(static_cast<size_t>(index) + 1);
    return index;
  }
  // One entry per watched thread, in watch order; `what`: PARMON_SINCE_LAST_READ or
  // PARMON_LAST_INTERVAL. Empty when not recorded. The reference stays valid until the next call.
  const std::vector<parmon_thread_figures>& Read(int what = PARMON_SINCE_LAST_READ) {
    if (ok() && !figures_.empty()) {
      const int n =
          parmon_monitor_read(m_, what, figures_.data(), static_cast<int>(figures_.size()));
      if (n < 0)
        figures_.clear();
    }
    return figures_;
  }
  // Running / (running + queued) of a figure: the share of the CPU the thread got while it
  // wanted one (1 when it never waited for one); -1 without figures.
  static double CpuShare(const parmon_thread_figures& f) {
    const double run = static_cast<double>(f.states_ns[PARMON_STATE_RUNNING]);
    const double queued = static_cast<double>(f.states_ns[PARMON_STATE_QUEUED]);
    return run + queued > 0 ? run / (run + queued) : -1.0;
  }

 private:
  parmon_monitor* m_ = nullptr;
  int error_;
  std::vector<parmon_thread_figures> figures_;
};

}  // namespace parmon

// parmon_matrix with the element type deduced from the pointer (row-major).
template <typename T>
inline int parmon_matrix(parmon_id matrix, uint32_t rows, uint32_t cols, const T* data) {
  return parmon_matrix(matrix, ::parmon::ElemTypeOf<T>(), rows, cols, data);
}

#define PARMON_CONCAT_INNER_(a, b) a##b
#define PARMON_CONCAT_(a, b) PARMON_CONCAT_INNER_(a, b)

// PARMON_SCOPE("name"): registers "name" once (thread-safe static) and records the enclosing
// scope as a region.
#define PARMON_SCOPE(name)                                                      \
  static const ::parmon::Region PARMON_CONCAT_(parmon_region_, __LINE__){name}; \
  const ::parmon::Scope PARMON_CONCAT_(parmon_scope_, __LINE__) {               \
    PARMON_CONCAT_(parmon_region_, __LINE__)                                    \
  }

#endif  // PARMON_PARMON_HPP_
