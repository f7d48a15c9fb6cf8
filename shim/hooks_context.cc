// The calling thread's current context, mirrored (shim/current_context.h): every call that changes
// it records what it made current, or that the driver chose (a pop). They need no shim state:
// the mirror is the thread's own, and they leave the shim inert.
//
// Context teardown. The driver frees everything a context owns when the context goes
// (cuCtxDestroy, cuDevicePrimaryCtxReset, the last cuDevicePrimaryCtxRelease): gpuslice
// credits each of those allocations then, taking their charges out before the driver is called
// and putting them back if it refuses (docs/accounting.md).
//
// The compute monitor synchronises the contexts this process launched from
// (shim/launch_routing.cc) on its own thread; the driver forbids using a context while it is being
// destroyed, so teardown runs while the monitor is paused, and the monitor forgets the contexts
// it destroyed.
#include "shim/driver_api.h"  // first: declares every versioned name

#include "common/mutex_lock.h"
#include "shim/current_context.h"
#include "shim/hook_entry.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

using gpuslice::MutexLock;
using gpuslice::shim::CurrentContext;
using gpuslice::shim::Real;
using gpuslice::shim::RealDriver;
using gpuslice::shim::ShimState;

namespace {

// The device's primary context while it is active (retained by someone), else nullptr: there
// is then nothing for a release or reset to destroy. Retained and released at once to learn it.
CUcontext ActivePrimaryContext(const RealDriver* real, CUdevice dev) {
  unsigned int flags = 0;
  int active = 0;
  if (!real->cuDevicePrimaryCtxGetState || !real->cuDevicePrimaryCtxRetain ||
      real->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active)
    return nullptr;
  CUcontext context = nullptr;
  if (real->cuDevicePrimaryCtxRetain(&context, dev) != CUDA_SUCCESS) return nullptr;
  real->cuDevicePrimaryCtxRelease_v2(dev);  // back to the count it had: destroys nothing
  return context;
}

// Runs `destroy`, which destroys `context` when it returns CUDA_SUCCESS and `destroyed()` says
// so, crediting what the context owned then.
// Without memory to list the context's charges, nothing is destroyed and the call fails as the
// driver's would: no exception leaves the hook.
template <typename Destroy, typename Destroyed>
CUresult TearDown(ShimState* state, CUcontext context, Destroy destroy, Destroyed destroyed) {
  ShimState::ContextCharges charges;
  try {
    charges = state->TakeContextCharges(context);
  } catch (...) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const CUresult rc = destroy();
  if (rc == CUDA_SUCCESS && destroyed()) {
    state->CreditContextCharges(charges);
  } else {
    state->RestoreContextCharges(charges);
  }
  return rc;
}

// The primary context's release or reset (`call`), which destroys it when `destroyed()` holds
// after the call succeeded.
template <typename Call, typename Destroyed>
CUresult TearDownPrimary(const RealDriver* real, CUdevice dev, Call call, Destroyed destroyed) {
  ShimState* state = ShimState::Get();
  if (!state) {
    CurrentContext::ForgetEverywhere();  // whether it destroyed the context or not: asked again
    return call();
  }
  MutexLock pause(&state->pause_mutex());
  bool gone = false;
  const CUresult rc = TearDown(state, ActivePrimaryContext(real, dev), call, [&] { return gone = destroyed(); });
  if (rc == CUDA_SUCCESS && gone) state->ForgetContexts(nullptr, dev);
  return rc;
}

}  // namespace

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuCtxDestroy_v2)
  ShimState* state = ShimState::Get();
  if (!state) {
    const CUresult rc = real->cuCtxDestroy_v2(ctx);
    if (rc == CUDA_SUCCESS) CurrentContext::ForgetEverywhere();
    return rc;
  }
  MutexLock pause(&state->pause_mutex());
  const CUresult rc = TearDown(
      state, ctx, [&] { return real->cuCtxDestroy_v2(ctx); }, [] { return true; });
  if (rc == CUDA_SUCCESS) state->ForgetContexts(ctx, -1);
  return rc;
}

// Only the last release destroys the primary context.
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuDevicePrimaryCtxRelease_v2)
  return TearDownPrimary(
      real, dev, [&] { return real->cuDevicePrimaryCtxRelease_v2(dev); },
      [&] {
        unsigned int flags = 0;
        int active = 0;
        return !real->cuDevicePrimaryCtxGetState ||
               real->cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active;
      });
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuDevicePrimaryCtxReset_v2)
  return TearDownPrimary(
      real, dev, [&] { return real->cuDevicePrimaryCtxReset_v2(dev); }, [] { return true; });
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuCtxSetCurrent)
  const CUresult rc = real->cuCtxSetCurrent(ctx);
  if (rc == CUDA_SUCCESS) {
    CurrentContext::Set(ctx);
  } else {
    CurrentContext::Unknown();
  }
  return rc;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuCtxPushCurrent_v2)
  const CUresult rc = real->cuCtxPushCurrent_v2(ctx);
  if (rc == CUDA_SUCCESS) {
    CurrentContext::Set(ctx);
  } else {
    CurrentContext::Unknown();
  }
  return rc;
}

// The context below on the thread's stack becomes current: the driver knows which.
CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuCtxPopCurrent_v2)
  CurrentContext::Unknown();
  return real->cuCtxPopCurrent_v2(pctx);
}

// A created context is pushed onto the thread's stack: it is current.
CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuCtxCreate_v2)
  CurrentContext::Unknown();
  return real->cuCtxCreate_v2(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams, unsigned int flags,
                                CUdevice dev) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuCtxCreate_v3)
  CurrentContext::Unknown();
  return real->cuCtxCreate_v3(pctx, paramsArray, numParams, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags, CUdevice dev) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuCtxCreate_v4)
  CurrentContext::Unknown();
  return real->cuCtxCreate_v4(pctx, ctxCreateParams, flags, dev);
}
