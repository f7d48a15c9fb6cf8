// Context teardown. The compute monitor synchronises the contexts this process launched from
// (shim/compute_gate.cc) on its own thread; the driver forbids using a context while it is being
// destroyed, so cuCtxDestroy and the primary context's release and reset run while the monitor
// is paused, and the monitor forgets the contexts they destroyed.
#include "shim/driver_api.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

using gpuslice::shim::Real;
using gpuslice::shim::ShimState;

#define GPUSLICE_REAL_OR_UNSUPPORTED(name) \
  const auto* real = Real();               \
  if (!real) return CUDA_ERROR_NOT_INITIALIZED; \
  if (!real->name) return CUDA_ERROR_NOT_SUPPORTED;

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuCtxDestroy_v2)
  ShimState* state = ShimState::Get();
  if (!state) return real->cuCtxDestroy_v2(ctx);
  auto pause = state->PauseSynchronisation();
  const CUresult rc = real->cuCtxDestroy_v2(ctx);
  if (rc == CUDA_SUCCESS) state->ForgetContexts(ctx, -1);
  return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuDevicePrimaryCtxRelease_v2)
  ShimState* state = ShimState::Get();
  if (!state) return real->cuDevicePrimaryCtxRelease_v2(dev);
  auto pause = state->PauseSynchronisation();
  const CUresult rc = real->cuDevicePrimaryCtxRelease_v2(dev);
  unsigned int flags = 0;
  int active = 0;
  // The last release destroys the primary context.
  if (rc == CUDA_SUCCESS && (!real->cuDevicePrimaryCtxGetState ||
                             real->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active))
    state->ForgetContexts(nullptr, dev);
  return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuDevicePrimaryCtxReset_v2)
  ShimState* state = ShimState::Get();
  if (!state) return real->cuDevicePrimaryCtxReset_v2(dev);
  auto pause = state->PauseSynchronisation();
  const CUresult rc = real->cuDevicePrimaryCtxReset_v2(dev);
  if (rc == CUDA_SUCCESS) state->ForgetContexts(nullptr, dev);
  return rc;
}
