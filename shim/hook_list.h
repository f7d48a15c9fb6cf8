// The one list of driver and NVML entry points libgpuslice.so intercepts, and of those it only
// calls. Types come from the declarations in cuda.h / nvml_api.h (decltype), so a hook with the
// wrong signature does not compile; adding a hook is one line here plus its definition.
#pragma once

// Exported and intercepted.
#define GPUSLICE_DRIVER_HOOKS(X)      \
  X(cuInit)                           \
  X(cuGetProcAddress)                 \
  X(cuGetProcAddress_v2)              \
  X(cuMemAlloc_v2)                    \
  X(cuMemAllocPitch_v2)               \
  X(cuMemAllocManaged)                \
  X(cuMemFree_v2)                     \
  X(cuMemAllocAsync)                  \
  X(cuMemAllocAsync_ptsz)             \
  X(cuMemAllocFromPoolAsync)          \
  X(cuMemAllocFromPoolAsync_ptsz)     \
  X(cuMemFreeAsync)                   \
  X(cuMemFreeAsync_ptsz)              \
  X(cuMemPoolCreate)                  \
  X(cuMemPoolDestroy)                 \
  X(cuMemCreate)                      \
  X(cuMemRelease)                     \
  X(cuArrayCreate_v2)                 \
  X(cuArray3DCreate_v2)               \
  X(cuArrayDestroy)                   \
  X(cuMipmappedArrayCreate)           \
  X(cuMipmappedArrayDestroy)          \
  X(cuMemGetInfo_v2)                  \
  X(cuDeviceTotalMem_v2)              \
  X(cuLaunchKernel)                   \
  X(cuLaunchKernel_ptsz)              \
  X(cuLaunchKernelEx)                 \
  X(cuLaunchKernelEx_ptsz)            \
  X(cuLaunchCooperativeKernel)        \
  X(cuLaunchCooperativeKernel_ptsz)   \
  X(cuGraphLaunch)                    \
  X(cuGraphLaunch_ptsz)               \
  X(cuCtxDestroy_v2)                  \
  X(cuDevicePrimaryCtxRelease_v2)     \
  X(cuDevicePrimaryCtxReset_v2)       \
  X(cuCtxSetCurrent)                  \
  X(cuCtxPushCurrent_v2)              \
  X(cuCtxPopCurrent_v2)               \
  X(cuCtxCreate_v2)                   \
  X(cuCtxCreate_v3)                   \
  X(cuCtxCreate_v4)                   \
  X(cuCtxSynchronize)                 \
  X(cuCtxSynchronize_v2)              \
  X(cuStreamSynchronize)              \
  X(cuStreamSynchronize_ptsz)         \
  X(cuStreamQuery)                    \
  X(cuStreamQuery_ptsz)               \
  X(cuStreamDestroy_v2)               \
  X(cuEventRecord)                    \
  X(cuEventRecord_ptsz)               \
  X(cuEventRecordWithFlags)           \
  X(cuEventRecordWithFlags_ptsz)      \
  X(cuEventSynchronize)               \
  X(cuEventQuery)                     \
  X(cuStreamBeginCapture_v2)          \
  X(cuStreamBeginCapture_v2_ptsz)     \
  X(cuStreamBeginCaptureToGraph)      \
  X(cuStreamBeginCaptureToGraph_ptsz) \
  X(cuStreamEndCapture)               \
  X(cuStreamEndCapture_ptsz)

// Called by the shim, not intercepted.
#define GPUSLICE_DRIVER_CALLS(X) \
  X(cuCtxGetDevice)              \
  X(cuDeviceGetUuid_v2)          \
  X(cuCtxGetCurrent)             \
  X(cuStreamGetCtx)              \
  X(cuDeviceGetCount)            \
  X(cuDeviceGetDefaultMemPool)   \
  X(cuDevicePrimaryCtxRetain)    \
  X(cuDevicePrimaryCtxGetState)  \
  X(cuEventCreate)               \
  X(cuEventDestroy_v2)           \
  X(cuThreadExchangeStreamCaptureMode)

#define GPUSLICE_NVML_HOOKS(X) \
  X(nvmlDeviceGetMemoryInfo)   \
  X(nvmlDeviceGetMemoryInfo_v2)

#define GPUSLICE_NVML_CALLS(X) X(nvmlDeviceGetUUID)
