// gpuslice-test-direct: a program linked with -lcuda that calls the driver by name, as C and
// C++ programs written against the driver API do. Every call below is an ordinary call through
// the PLT to the name cuda.h gives it (cuMemAlloc -> cuMemAlloc_v2, ...), so LD_PRELOAD reaches
// it by symbol preemption alone.
//
// Built a second time with CUDA_API_PER_THREAD_DEFAULT_STREAM (gpuslice-test-direct-ptsz), cuda.h
// renames the stream calls: this same source then imports cuMemAllocAsync_ptsz,
// cuMemAllocFromPoolAsync_ptsz, cuMemFreeAsync_ptsz and cuStreamSynchronize_ptsz, as a program
// compiled with `nvcc --default-stream per-thread` does.
//
// Usage and output: tests/apps/test_app.h.
#include <cuda.h>

#include "tests/apps/test_app.h"

namespace {

using gpuslice::testapp::DriverTable;

// Captureless lambdas, so each call site is a direct call of the driver function by name.
DriverTable DirectCalls() {
  DriverTable d;
  d.init = [](unsigned int flags) { return cuInit(flags); };
  d.get_error_name = [](CUresult rc, const char** name) { return cuGetErrorName(rc, name); };
  d.device_get = [](CUdevice* device, int ordinal) { return cuDeviceGet(device, ordinal); };
  d.primary_ctx_retain = [](CUcontext* ctx, CUdevice device) { return cuDevicePrimaryCtxRetain(ctx, device); };
  d.ctx_set_current = [](CUcontext ctx) { return cuCtxSetCurrent(ctx); };
  d.mem_get_info = [](size_t* free, size_t* total) { return cuMemGetInfo(free, total); };
  d.device_total_mem = [](size_t* bytes, CUdevice device) { return cuDeviceTotalMem(bytes, device); };
  d.mem_alloc = [](CUdeviceptr* ptr, size_t bytes) { return cuMemAlloc(ptr, bytes); };
  d.mem_alloc_pitch = [](CUdeviceptr* ptr, size_t* pitch, size_t width, size_t height, unsigned int element) {
    return cuMemAllocPitch(ptr, pitch, width, height, element);
  };
  d.mem_alloc_managed = [](CUdeviceptr* ptr, size_t bytes, unsigned int flags) {
    return cuMemAllocManaged(ptr, bytes, flags);
  };
  d.mem_free = [](CUdeviceptr ptr) { return cuMemFree(ptr); };
  d.mem_alloc_async = [](CUdeviceptr* ptr, size_t bytes, CUstream stream) {
    return cuMemAllocAsync(ptr, bytes, stream);
  };
  d.mem_alloc_from_pool_async = [](CUdeviceptr* ptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
    return cuMemAllocFromPoolAsync(ptr, bytes, pool, stream);
  };
  d.mem_free_async = [](CUdeviceptr ptr, CUstream stream) { return cuMemFreeAsync(ptr, stream); };
  d.stream_synchronize = [](CUstream stream) { return cuStreamSynchronize(stream); };
  d.mem_pool_create = [](CUmemoryPool* pool, const CUmemPoolProps* props) { return cuMemPoolCreate(pool, props); };
  d.mem_pool_destroy = [](CUmemoryPool pool) { return cuMemPoolDestroy(pool); };
  d.mem_get_allocation_granularity = [](size_t* granularity, const CUmemAllocationProp* prop,
                                        CUmemAllocationGranularity_flags option) {
    return cuMemGetAllocationGranularity(granularity, prop, option);
  };
  d.mem_create = [](CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                    unsigned long long flags) { return cuMemCreate(handle, size, prop, flags); };
  d.mem_release = [](CUmemGenericAllocationHandle handle) { return cuMemRelease(handle); };
  d.mem_address_reserve = [](CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
    return cuMemAddressReserve(ptr, size, alignment, addr, flags);
  };
  d.mem_address_free = [](CUdeviceptr ptr, size_t size) { return cuMemAddressFree(ptr, size); };
  d.mem_map = [](CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                 unsigned long long flags) { return cuMemMap(ptr, size, offset, handle, flags); };
  d.mem_unmap = [](CUdeviceptr ptr, size_t size) { return cuMemUnmap(ptr, size); };
  d.mem_set_access = [](CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
    return cuMemSetAccess(ptr, size, desc, count);
  };
  d.array_create = [](CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) { return cuArrayCreate(array, desc); };
  d.array3d_create = [](CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) { return cuArray3DCreate(array, desc); };
  d.array_destroy = [](CUarray array) { return cuArrayDestroy(array); };
  d.mipmapped_array_create = [](CUmipmappedArray* mipmap, const CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned int levels) {
    return cuMipmappedArrayCreate(mipmap, desc, levels);
  };
  d.mipmapped_array_destroy = [](CUmipmappedArray mipmap) { return cuMipmappedArrayDestroy(mipmap); };
  d.ctx_create = [](CUcontext* ctx, CUctxCreateParams* params, unsigned int flags, CUdevice device) {
    return cuCtxCreate(ctx, params, flags, device);
  };
  d.ctx_destroy = [](CUcontext ctx) { return cuCtxDestroy(ctx); };
  d.primary_ctx_release = [](CUdevice device) { return cuDevicePrimaryCtxRelease(device); };
  d.primary_ctx_reset = [](CUdevice device) { return cuDevicePrimaryCtxReset(device); };
  d.stream_create = [](CUstream* stream, unsigned int flags) { return cuStreamCreate(stream, flags); };
  d.stream_destroy = [](CUstream stream) { return cuStreamDestroy(stream); };
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  gpuslice::testapp::Options options;
  if (!gpuslice::testapp::ParseOptions(argc, argv, 1, {}, {}, &options)) return 2;
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
  const char* app = "direct-ptsz";
#else
  const char* app = "direct";
#endif
  return gpuslice::testapp::RunAllocations(DirectCalls(), options, app);
}
