// How a hook that needs the shim's state begins: the real driver (CUDA_ERROR_NOT_INITIALIZED
// when none could be loaded, kFailClosed when that is because a GPUSLICE_* setting is bad, as
// cuInit says) and the state (kFailClosed when initialisation failed).
#pragma once

#include "shim/real_driver.h"
#include "shim/shim_state.h"

namespace gpuslice::shim {

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
