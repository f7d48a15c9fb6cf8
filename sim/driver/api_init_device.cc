// cuInit, the driver version, and device queries.
#include "driver_api.h"

#include <cstdio>
#include <cstring>

#include "driver_state.h"
#include "sim/work_model.h"

using gpuslice::sim::Driver;
using gpuslice::sim::RequireDevice;
using gpuslice::sim::RequireInit;

// A bad GPUSLICE_SIM_CALL_COSTS fails every run at its start: no figure is measured with costs
// other than those asked for.
CUresult CUDAAPI cuInit(unsigned int Flags) try {
  GPUSLICE_SIM_ENTRY();
  if (!gpuslice::sim::call_model::SettingsValid()) return CUDA_ERROR_INVALID_VALUE;
  return Driver::Initialize(Flags);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) try {
  GPUSLICE_SIM_ENTRY();
  // Allowed before cuInit, as with the real driver.
  if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDA_VERSION;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceGetCount(int* count) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  *count = d->device_count();
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= d->device_count()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(len), "%s", d->device_config(dev).name);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(uuid->bytes, d->device_config(dev).uuid, sizeof uuid->bytes);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  return cuDeviceGetUuid_v2(uuid, dev);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  *bytes = d->device_config(dev).total_memory;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
  *major = d->device_config(dev).cc_major;
  *minor = d->device_config(dev).cc_minor;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  const auto& c = d->device_config(dev);
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = c.sm_count; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = c.cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = c.cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = c.pci_bus_id; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = gpuslice::sim::kMaxThreadsPerSm; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *pi = gpuslice::sim::kMaxResidentBlocksPerSm; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *pi = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *pi = 5120; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *pi = 50 << 20; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *pi = 2; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: *pi = CU_COMPUTEMODE_DEFAULT; break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED: *pi = 0; break;
    default: *pi = 0; break;  // a valid attribute the simulator does not model
  }
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireDevice(&d, dev); rc != CUDA_SUCCESS) return rc;
  if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(pciBusId, static_cast<size_t>(len), "00000000:%02X:00.0", d->device_config(dev).pci_bus_id);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
