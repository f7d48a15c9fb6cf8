// How every hook begins and reaches the real driver, with one failure policy
// (docs/interposition.md, "Failure policy"):
//  - a hook that needs the shim's state (to charge memory, gate a launch) enters through
//    EnterHook: CUDA_ERROR_NOT_INITIALIZED when no driver could be loaded, kFailClosed when that
//    is because a GPUSLICE_* setting is bad (as cuInit says) or when the state could not be set
//    up — never unlimited;
//  - every call it forwards goes through CallReal (or GPUSLICE_REAL_OR_UNSUPPORTED), which
//    answers CUDA_ERROR_NOT_SUPPORTED for an entry point the driver lacks (an older driver than
//    the headers the program was built with) instead of calling a null pointer.
#pragma once

#include <utility>

#include "shim/real_driver.h"
#include "shim/shim_state.h"

// In a hook: `real`, the loaded driver, which has `name`; else the hook returns.
#define GPUSLICE_REAL_OR_UNSUPPORTED(name)      \
  const auto* real = ::gpuslice::shim::Real();  \
  if (!real) return CUDA_ERROR_NOT_INITIALIZED; \
  if (!real->name) return CUDA_ERROR_NOT_SUPPORTED;

namespace gpuslice::shim {

// The real driver's entry point `Member` (a RealDriver member) called with `args`.
template <auto Member, typename... Args>
CUresult CallReal(Args&&... args) {
  const RealDriver* real = Real();
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const auto fn = real->*Member;
  if (!fn) return CUDA_ERROR_NOT_SUPPORTED;
  return fn(std::forward<Args>(args)...);
}

inline CUresult EnterHook(const RealDriver** real, ShimState** state) {
  *real = Real();
  if (!*real) {
    bool valid = false;
    ProcessOptions(&valid);
    return valid ? CUDA_ERROR_NOT_INITIALIZED : kFailClosed;
  }
  *state = ShimState::Get();
  return *state ? CUDA_SUCCESS : kFailClosed;
}

}  // namespace gpuslice::shim
