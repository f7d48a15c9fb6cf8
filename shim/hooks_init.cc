// cuInit and cuGetProcAddress: where the shim initialises, and how the CUDA runtime (which
// obtains every entry point through cuGetProcAddress) is handed gpuslice's hooks.
#include "shim/driver_api.h"
#include "shim/mps_settings.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

using gpuslice::shim::kFailClosed;
using gpuslice::shim::Real;
using gpuslice::shim::ShimState;
using gpuslice::shim::SubstituteHook;

// Options and the broker come first: with a bad GPUSLICE_* value or an unusable segment the
// real driver is never initialised, so the process cannot run unlimited.
CUresult CUDAAPI cuInit(unsigned int Flags) {
  const auto* real = Real();
  if (!real) return gpuslice::shim::OptionsInvalid() ? kFailClosed : CUDA_ERROR_NO_DEVICE;
  ShimState* state = ShimState::Get();
  if (!state) return kFailClosed;
  gpuslice::shim::ApplyMpsSettings(state);
  return real->cuInit(Flags);
}

// Allowed before cuInit, like the driver's own: the runtime looks up cuInit through it.
CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult* symbolStatus) {
  const auto* real = Real();
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult rc = real->cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
  // sabotage-point: proc-address-substitution-off.v2
  if (rc == CUDA_SUCCESS && pfn) *pfn = SubstituteHook(symbol, cudaVersion, flags, *pfn);
  return rc;
}

CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  const auto* real = Real();
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  if (!real->cuGetProcAddress) return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, nullptr);
  const CUresult rc = real->cuGetProcAddress(symbol, pfn, cudaVersion, flags);
  // sabotage-point: proc-address-substitution-off.v1
  if (rc == CUDA_SUCCESS && pfn) *pfn = SubstituteHook(symbol, cudaVersion, flags, *pfn);
  return rc;
}
