// parmon.hpp -- C++ wrappers over the C interface in parmon.h: RAII region scopes.
#ifndef PARMON_PARMON_HPP_
#define PARMON_PARMON_HPP_

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

}  // namespace parmon

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
