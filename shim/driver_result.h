// A value, or the CUresult that says why there is none: what the shim's own lookups (a device's
// ledger, a stream's device) answer a hook with, so that the hook passes the driver's code on as
// the driver would have. common/status.h's Result<T> carries a line for a person instead; a hook
// has no one to tell, and nothing here allocates.
#pragma once

#include <cassert>
#include <optional>

#include "shim/driver_api.h"

namespace gpuslice::shim {

template <typename T>
class [[nodiscard]] DriverResult {
 public:
  DriverResult(T value) : value_(value) {}  // NOLINT(google-explicit-constructor)
  // An error; CUDA_SUCCESS without a value is a programming error and reads as an error.
  DriverResult(CUresult rc) : rc_(rc == CUDA_SUCCESS ? CUDA_ERROR_UNKNOWN : rc) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  // CUDA_SUCCESS when ok.
  CUresult rc() const { return rc_; }
  // Only when ok().
  const T& operator*() const {
    assert(ok());
    return *value_;
  }

 private:
  std::optional<T> value_;
  CUresult rc_ = CUDA_SUCCESS;
};

}  // namespace gpuslice::shim
