// A CUDA "driver" with only the entry points gpuslice requires to load one (real_driver.cc) and
// none of the rest: what an older driver than a program's headers looks like to the shim. Its
// device has 16 GiB, one context, and does nothing. shim_missing_entry_points_test loads it with
// GPUSLICE_DRIVER_LIBRARY.
#include <cuda.h>

#include <cstring>

extern "C" {

__attribute__((visibility("default"))) CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char*, void** pfn, int, cuuint64_t,
                                                                    CUdriverProcAddressQueryResult* status) {
  if (pfn) *pfn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) CUresult cuCtxGetDevice(CUdevice* device) {
  *device = 0;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice) {
  std::memset(uuid, 0x42, sizeof *uuid);
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice) {
  *bytes = size_t{16} << 30;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  *free = *total = size_t{16} << 30;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuCtxGetCurrent(CUcontext* context) {
  *context = reinterpret_cast<CUcontext>(0x1000);
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult cuCtxSynchronize() { return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult cuCtxPushCurrent_v2(CUcontext) { return CUDA_SUCCESS; }
__attribute__((visibility("default"))) CUresult cuCtxPopCurrent_v2(CUcontext* context) {
  if (context) *context = reinterpret_cast<CUcontext>(0x1000);
  return CUDA_SUCCESS;
}

}  // extern "C"
