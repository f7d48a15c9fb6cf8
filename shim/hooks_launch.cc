// Kernel launches pass straight through while no compute policy is active: the cost the shim
// adds here is one load of a cached pointer (bench/shim_overhead_bench.cc measures it).
#include "shim/driver_api.h"
#include "shim/real_driver.h"

using gpuslice::shim::Real;

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  static const auto* real = Real();
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  return real->cuLaunchKernel(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,
                              hStream, kernelParams, extra);
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                     void** kernelParams, void** extra) {
  static const auto* real = Real();
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  return real->cuLaunchKernel_ptsz(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                   sharedMemBytes, hStream, kernelParams, extra);
}
