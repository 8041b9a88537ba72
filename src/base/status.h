// Status and StatusOr: how the tools (not the runtime) report errors. A Status carries a sentence
// for the user: what went wrong and, where it helps, what to do about it.
#ifndef PARMON_SRC_BASE_STATUS_H_
#define PARMON_SRC_BASE_STATUS_H_

#include <optional>
#include <string>
#include <utility>

namespace parmon {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) {
    Status s;
    s.ok_ = false;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return ok_; }
  const std::string& message() const { return message_; }

 private:
  bool ok_ = true;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace parmon

#define PARMON_STATUS_CONCAT_INNER_(a, b) a##b
#define PARMON_STATUS_CONCAT_(a, b) PARMON_STATUS_CONCAT_INNER_(a, b)

#define PARMON_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::parmon::Status parmon_status_ = (expr); \
    if (!parmon_status_.ok())                 \
      return parmon_status_;                  \
  } while (0)

#define PARMON_ASSIGN_OR_RETURN(lhs, expr)                       \
  auto PARMON_STATUS_CONCAT_(parmon_or_, __LINE__) = (expr);     \
  if (!PARMON_STATUS_CONCAT_(parmon_or_, __LINE__).ok())         \
    return PARMON_STATUS_CONCAT_(parmon_or_, __LINE__).status(); \
  lhs = std::move(PARMON_STATUS_CONCAT_(parmon_or_, __LINE__)).value()

#endif  // PARMON_SRC_BASE_STATUS_H_
