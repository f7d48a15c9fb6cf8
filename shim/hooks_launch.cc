// Every work-submission entry point waits for its tenant's grant on the GPU (docs/scheduling.md):
// the kernel-launch family, cooperative launches and graph launches, legacy and per-thread.
// Copies and memsets are not gated: they run on the copy engines, which time-slicing of the SMs
// does not share out.
//
// The fast path — the tenant holds the grant — is the gate's TryEnter/Exit around the driver
// call: no lock, no system call, no other driver call.
#include "shim/driver_api.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

namespace gpuslice::shim {
namespace {

template <typename Call>
CUresult Gated(CUstream stream, Call call) {
  ShimState* state = ShimState::Get();
  if (!state) return kFailClosed;
  broker::ComputeGate* gate = state->GateForLaunch(stream);
  if (!gate || !gate->gated()) return call();
  if (!gate->TryEnter()) {
    state->NoteContext(gate);  // the monitor must be able to synchronise what we launch
    while (true) {
      gate->Acquire();
      if (!gate->gated()) return call();  // the operator switched the GPU to mode none/mps
      if (gate->TryEnter()) break;
    }
  }
  const CUresult rc = call();
  gate->Exit();
  return rc;
}

}  // namespace
}  // namespace gpuslice::shim

using gpuslice::shim::Gated;
using gpuslice::shim::Real;

#define GPUSLICE_REAL_OR_UNSUPPORTED(name) \
  const auto* real = Real();               \
  if (!real) return CUDA_ERROR_NOT_INITIALIZED; \
  if (!real->name) return CUDA_ERROR_NOT_SUPPORTED;

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchKernel)
  return Gated(hStream, [&] {
    return real->cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                                hStream, kernelParams, extra);
  });
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                     void** kernelParams, void** extra) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchKernel_ptsz)
  return Gated(hStream, [&] {
    return real->cuLaunchKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                     sharedMemBytes, hStream, kernelParams, extra);
  });
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchKernelEx)
  return Gated(config ? config->hStream : nullptr, [&] { return real->cuLaunchKernelEx(config, f, kernelParams, extra); });
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                                       void** extra) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchKernelEx_ptsz)
  return Gated(config ? config->hStream : nullptr,
               [&] { return real->cuLaunchKernelEx_ptsz(config, f, kernelParams, extra); });
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                           unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                           void** kernelParams) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchCooperativeKernel)
  return Gated(hStream, [&] {
    return real->cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                           sharedMemBytes, hStream, kernelParams);
  });
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                unsigned int gridDimZ, unsigned int blockDimX,
                                                unsigned int blockDimY, unsigned int blockDimZ,
                                                unsigned int sharedMemBytes, CUstream hStream,
                                                void** kernelParams) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchCooperativeKernel_ptsz)
  return Gated(hStream, [&] {
    return real->cuLaunchCooperativeKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                                sharedMemBytes, hStream, kernelParams);
  });
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuGraphLaunch)
  return Gated(hStream, [&] { return real->cuGraphLaunch(hGraphExec, hStream); });
}

CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuGraphLaunch_ptsz)
  return Gated(hStream, [&] { return real->cuGraphLaunch_ptsz(hGraphExec, hStream); });
}
