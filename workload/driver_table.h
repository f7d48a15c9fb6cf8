// The driver entry points the workload uses, obtained the way the CUDA runtime obtains them:
// dlopen("libcuda.so.1"), dlsym("cuGetProcAddress_v2") and then cuGetProcAddress for everything
// else, with this header's CUDA_VERSION. Nothing links libcuda, so an interposer that only
// preloads symbols is bypassed here exactly as it would be under the runtime.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

namespace gpuslice::workload {

// One line per entry point: base name, and the PFN typedef of the newest version at or below
// CUDA_VERSION (the one cuGetProcAddress returns for it). cuGetProcAddress must stay first: the
// rest are looked up through the pointer it yields.
//
// Member names go through cuda.h's renaming macros (cuMemAlloc becomes cuMemAlloc_v2) the same
// way at declaration and use; the string looked up is the unexpanded base name.
#define GPUSLICE_WORKLOAD_ENTRY_POINTS(X)                                    \
  X(cuGetProcAddress, PFN_cuGetProcAddress_v12000)                           \
  X(cuGetErrorName, PFN_cuGetErrorName_v6000)                                \
  X(cuInit, PFN_cuInit_v2000)                                                \
  X(cuDriverGetVersion, PFN_cuDriverGetVersion_v2020)                        \
  X(cuDeviceGet, PFN_cuDeviceGet_v2000)                                      \
  X(cuDeviceGetName, PFN_cuDeviceGetName_v2000)                              \
  X(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000)                    \
  X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000)            \
  X(cuDevicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000)         \
  X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)                              \
  X(cuModuleLoadData, PFN_cuModuleLoadData_v2000)                            \
  X(cuModuleGetFunction, PFN_cuModuleGetFunction_v2000)                      \
  X(cuModuleUnload, PFN_cuModuleUnload_v2000)                                \
  X(cuLaunchKernel, PFN_cuLaunchKernel_v4000)                                \
  X(cuStreamCreate, PFN_cuStreamCreate_v2000)                                \
  X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)                      \
  X(cuStreamDestroy, PFN_cuStreamDestroy_v4000)                              \
  X(cuEventCreate, PFN_cuEventCreate_v2000)                                  \
  X(cuEventRecord, PFN_cuEventRecord_v2000)                                  \
  X(cuEventSynchronize, PFN_cuEventSynchronize_v2000)                        \
  X(cuEventDestroy, PFN_cuEventDestroy_v4000)                                \
  X(cuMemGetInfo, PFN_cuMemGetInfo_v3020)                                    \
  X(cuMemAlloc, PFN_cuMemAlloc_v3020)                                        \
  X(cuMemAllocPitch, PFN_cuMemAllocPitch_v3020)                              \
  X(cuMemAllocManaged, PFN_cuMemAllocManaged_v6000)                          \
  X(cuMemFree, PFN_cuMemFree_v3020)                                          \
  X(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020)                             \
  X(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020)                               \
  X(cuMemPoolCreate, PFN_cuMemPoolCreate_v11020)                             \
  X(cuMemPoolDestroy, PFN_cuMemPoolDestroy_v11020)                           \
  X(cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync_v11020)             \
  X(cuMemGetAllocationGranularity, PFN_cuMemGetAllocationGranularity_v10020) \
  X(cuMemCreate, PFN_cuMemCreate_v10020)                                     \
  X(cuMemRelease, PFN_cuMemRelease_v10020)                                   \
  X(cuMemAddressReserve, PFN_cuMemAddressReserve_v10020)                     \
  X(cuMemAddressFree, PFN_cuMemAddressFree_v10020)                           \
  X(cuMemMap, PFN_cuMemMap_v10020)                                           \
  X(cuMemUnmap, PFN_cuMemUnmap_v10020)                                       \
  X(cuMemSetAccess, PFN_cuMemSetAccess_v10020)                               \
  X(cuArrayCreate, PFN_cuArrayCreate_v3020)                                  \
  X(cuArrayDestroy, PFN_cuArrayDestroy_v2000)                                \
  X(cuMemsetD8, PFN_cuMemsetD8_v3020)                                        \
  X(cuStreamBeginCapture, PFN_cuStreamBeginCapture_v10010)                   \
  X(cuStreamEndCapture, PFN_cuStreamEndCapture_v10000)                       \
  X(cuGraphInstantiateWithFlags, PFN_cuGraphInstantiateWithFlags_v11040)     \
  X(cuGraphLaunch, PFN_cuGraphLaunch_v10000)                                 \
  X(cuGraphExecDestroy, PFN_cuGraphExecDestroy_v10000)                       \
  X(cuGraphDestroy, PFN_cuGraphDestroy_v10000)

struct DriverTable {
#define GPUSLICE_WORKLOAD_DECLARE(name, pfn) pfn name = nullptr;
  GPUSLICE_WORKLOAD_ENTRY_POINTS(GPUSLICE_WORKLOAD_DECLARE)
#undef GPUSLICE_WORKLOAD_DECLARE

  // "CUDA_ERROR_OUT_OF_MEMORY", or "CUresult 2" when the driver has no name for it.
  std::string ErrorName(CUresult result) const;
};

// Fills every entry of *table. On failure returns false and sets *error to one line saying what
// is missing (the library, or an entry point and what cuGetProcAddress answered). The library
// stays loaded for the life of the process.
bool LoadDriverTable(DriverTable* table, std::string* error);

}  // namespace gpuslice::workload
