// A "driver" whose calls do nothing: libcuda.so.1 for shim_overhead_bench, so that the cost
// gpuslice adds is measured without the simulated driver's own cost (locks, mmap, a worker
// thread) and its noise around it. Only the entry points the benchmark and the shim use.
#define __CUDA_API_VERSION_INTERNAL 1
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

#include <atomic>
#include <cstring>

namespace {
std::atomic<CUdeviceptr> g_next{1ULL << 40};
int g_context_token = 0;
}  // namespace

CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuGetProcAddress_v2(const char*, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* s) {
  if (pfn) *pfn = nullptr;
  if (s) *s = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice) {
  std::memset(uuid->bytes, 0x42, sizeof uuid->bytes);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice) {
  *bytes = 80ULL << 30;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  *free = *total = 80ULL << 30;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  *dptr = g_next.fetch_add((bytes + 511) & ~size_t{511});
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                CUstream, void**, void**) {
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice) {
  *ctx = reinterpret_cast<CUcontext>(&g_context_token);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void*) {
  *module = reinterpret_cast<CUmodule>(&g_context_token);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule, const char*) {
  *f = reinterpret_cast<CUfunction>(&g_context_token);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  *s = reinterpret_cast<CUstream>(&g_context_token);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = reinterpret_cast<CUcontext>(&g_context_token);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSynchronize() { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* ctx) {
  if (ctx) *ctx = reinterpret_cast<CUcontext>(&g_context_token);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamGetCtx(CUstream, CUcontext* ctx) {
  *ctx = reinterpret_cast<CUcontext>(&g_context_token);
  return CUDA_SUCCESS;
}
// Events: what a tracked launch records behind itself (every launch while another tenant shares
// the GPU, or of a limited or non-standard tenant). Each completes at once.
CUresult CUDAAPI cuEventCreate(CUevent* event, unsigned int) {
  *event = reinterpret_cast<CUevent>(&g_context_token);
  return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventQuery(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventDestroy_v2(CUevent) { return CUDA_SUCCESS; }
