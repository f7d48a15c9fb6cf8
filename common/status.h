// How the broker and the tools report failure: a Status (ok, or a code and one line for a
// person) and a Result<T> (a value, or the Status that says why there is none). Errors are
// values, never exceptions: the shim runs inside someone else's process and answers its C callers
// with a CUresult, so what fails inside is a value the boundary maps (docs/interposition.md).
//
// The message is the whole line a user sees (it names the file or the value and the remedy);
// the code is for callers that choose what to do by the kind of failure, not by the text.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace gpuslice {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kError,              // any failure without a more useful kind
    kNotFound,           // what was asked for does not exist (yet)
    kResourceExhausted,  // a table or a quota is full
    kPermissionDenied,   // the operating system refused (EACCES, EPERM)
    kInvalidArgument,    // the input is malformed or out of range
    kUnavailable,        // a lock or a peer did not answer in time; may succeed later
  };

  Status() = default;  // ok
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(Code::kError, std::move(message)); }
  static Status Error(Code code, std::string message) { return Status(code, std::move(message)); }
  static Status NotFound(std::string message) { return Status(Code::kNotFound, std::move(message)); }
  static Status ResourceExhausted(std::string message) { return Status(Code::kResourceExhausted, std::move(message)); }
  static Status PermissionDenied(std::string message) { return Status(Code::kPermissionDenied, std::move(message)); }
  static Status InvalidArgument(std::string message) { return Status(Code::kInvalidArgument, std::move(message)); }
  static Status Unavailable(std::string message) { return Status(Code::kUnavailable, std::move(message)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  // Empty when ok.
  const std::string& message() const { return message_; }

 private:
  // An error always has a code other than kOk: Error(kOk, ...) would read as success.
  Status(Code code, std::string message)
      : code_(code == Code::kOk ? Code::kError : code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

// A T, or the Status saying why there is none. Built from a T (ok) or from an error Status; an ok
// Status without a value is a programming error and reads as an error.
template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Status>, "Result<Status> is a Status");

 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "Result built from an ok Status without a value");
    if (status_.ok()) status_ = Status::Error("internal error: no value and no error");
  }

  bool ok() const { return value_.has_value(); }
  // Ok when there is a value.
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }
  const std::string& message() const { return status_.message(); }

  // Only when ok().
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The value, or `fallback` when there is none.
  template <typename U>
  T value_or(U&& fallback) const& {
    return ok() ? *value_ : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace gpuslice
