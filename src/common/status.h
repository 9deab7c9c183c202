// Status and StatusOr<T>: the one error model of Tandem.
//
// Every fallible call at an I/O, RPC, file or config boundary returns Status or
// StatusOr<T>. The codes follow absl's meanings:
//   kUnavailable        transient; retry the same call (with backoff).
//   kAborted            retry at a higher level (e.g. the whole transaction).
//   kFailedPrecondition the system is not in a state for this call; do not retry.
//   kInvalidArgument    the caller's input is wrong, whatever the system state.
//   kDataLoss           unrecoverable corruption (e.g. a truncated file).
// Thread safety: values; no shared state.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tandem {

enum class StatusCode {
  kOk = 0,
  kCancelled,
  kInvalidArgument,
  kDeadlineExceeded,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kFailedPrecondition,
  kAborted,
  kOutOfRange,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kDataLoss,
  kUnauthenticated,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message" or "OK".
  std::string ToString() const;

  // Returns a copy with `prefix: ` prepended to the message (adds context on the way up).
  Status WithContext(std::string_view prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status OutOfRangeError(std::string message);
Status FailedPreconditionError(std::string message);
Status UnavailableError(std::string message);
Status AbortedError(std::string message);
Status InternalError(std::string message);
Status DataLossError(std::string message);
Status UnimplementedError(std::string message);
Status ResourceExhaustedError(std::string message);
Status AlreadyExistsError(std::string message);
Status PermissionDeniedError(std::string message);
Status UnauthenticatedError(std::string message);
Status DeadlineExceededError(std::string message);
Status CancelledError(std::string message);

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : status_(status) {  // NOLINT: implicit by design
    assert(!status_.ok() && "StatusOr from an OK Status has no value");
    if (status_.ok()) status_ = InternalError("StatusOr constructed from OK status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // Preconditions: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tandem

#define TANDEM_CONCAT_INNER_(a, b) a##b
#define TANDEM_CONCAT_(a, b) TANDEM_CONCAT_INNER_(a, b)

#define TANDEM_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::tandem::Status tandem_status_ = (expr);   \
    if (!tandem_status_.ok()) return tandem_status_; \
  } while (0)

#define TANDEM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#define TANDEM_ASSIGN_OR_RETURN(lhs, expr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL_(TANDEM_CONCAT_(tandem_statusor_, __LINE__), lhs, expr)
