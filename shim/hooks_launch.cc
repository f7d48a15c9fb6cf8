// Every work-submission entry point waits for its tenant's grant on the GPU (docs/scheduling.md):
// the kernel-launch family, cooperative launches and graph launches, legacy and per-thread.
// Copies and memsets are not gated: they run on the copy engines, which time-slicing of the SMs
// does not share out.
//
// The fast path — the tenant holds the grant — is the tracker's TryEnter/Exit around the driver
// call: a few atomic operations and no driver call of its own, alone or shared (shared, the
// launch is counted on its stream's track; shim/launch_tracker.h).
#include "shim/driver_api.h"  // first: declares every versioned name

#include "shim/hook_entry.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"
#include "shim/stream_capture.h"

namespace gpuslice::shim {
namespace {

template <typename Call>
CUresult GatedOrThrow(CUstream stream, bool per_thread, Call call);

// `per_thread`: a _ptsz entry point (stream 0 is the calling thread's own stream). Nothing leaves
// it as an exception: a guest in the application's process answers a launch it could not gate
// for want of memory (a thread's first launch creates its lane, a process's first on a GPU its
// gate) with CUDA_ERROR_OUT_OF_MEMORY, before launching anything. After the launch nothing
// allocates.
template <typename Call>
CUresult Gated(CUstream stream, bool per_thread, Call call) noexcept {
  try {
    return GatedOrThrow(stream, per_thread, call);
  } catch (...) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
}

template <typename Call>
CUresult GatedOrThrow(CUstream stream, bool per_thread, Call call) {
  ShimState* state = ShimState::Get();
  if (!state) return kFailClosed;
  // Captured into a graph, the launch runs nothing now: the graph's launch is what is gated.
  if (StreamCapture::Capturing(stream, per_thread)) return call();
  LaunchTracker::Entry entry;
  // sabotage-point: gating-off
  LaunchTracker* tracker = state->TrackerForLaunch(stream, per_thread, &entry.target);
  if (!tracker || !tracker->gate()->gated()) return call();
  if (!tracker->TryEnter(&entry)) {
    while (true) {
      tracker->Wait();
      if (!tracker->gate()->gated()) return call();  // the operator switched the GPU to mode none/mps
      if (tracker->TryEnter(&entry, true)) break;
    }
  }
  const CUresult rc = call();
  tracker->Exit(entry, rc);
  return rc;
}

}  // namespace
}  // namespace gpuslice::shim

using gpuslice::shim::Gated;
using gpuslice::shim::Real;

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchKernel)
  return Gated(hStream, false, [&] {
    return real->cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                                hStream, kernelParams, extra);
  });
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                     unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                     unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchKernel_ptsz)
  return Gated(hStream, true, [&] {
    return real->cuLaunchKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                                     hStream, kernelParams, extra);
  });
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchKernelEx)
  return Gated(config ? config->hStream : nullptr, false,
               [&] { return real->cuLaunchKernelEx(config, f, kernelParams, extra); });
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchKernelEx_ptsz)
  return Gated(config ? config->hStream : nullptr, true,
               [&] { return real->cuLaunchKernelEx_ptsz(config, f, kernelParams, extra); });
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                           unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                           unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                           void** kernelParams) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchCooperativeKernel)
  return Gated(hStream, false, [&] {
    return real->cuLaunchCooperativeKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                           sharedMemBytes, hStream, kernelParams);
  });
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                                unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                                unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                                void** kernelParams) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuLaunchCooperativeKernel_ptsz)
  return Gated(hStream, true, [&] {
    return real->cuLaunchCooperativeKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                                sharedMemBytes, hStream, kernelParams);
  });
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuGraphLaunch)
  return Gated(hStream, false, [&] { return real->cuGraphLaunch(hGraphExec, hStream); });
}

CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  GPUSLICE_REAL_OR_UNSUPPORTED(cuGraphLaunch_ptsz)
  return Gated(hStream, true, [&] { return real->cuGraphLaunch_ptsz(hGraphExec, hStream); });
}
