// Calls, through whatever the dynamic linker finds first (the preloaded libgpuslice.so), entry
// points the driver underneath may lack, and prints "<name> <CUresult>" for each: a hook that
// forwarded to a missing entry point would crash here instead.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>

namespace {

template <typename F, typename... Args>
void Call(const char* name, Args... args) {
  auto fn = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
  if (!fn) {
    std::printf("%s absent\n", name);
    return;
  }
  std::printf("%s %d\n", name, static_cast<int>(fn(args...)));
  std::fflush(stdout);
}

}  // namespace

int main() {
  CUdeviceptr pointer = 0;
  CUarray array = nullptr;
  CUmemGenericAllocationHandle handle = 0;
  CUDA_ARRAY_DESCRIPTOR descriptor{};
  descriptor.Width = 64;
  descriptor.Height = 64;
  descriptor.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  descriptor.NumChannels = 1;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  Call<CUresult (*)(unsigned int)>("cuInit", 0u);
  Call<CUresult (*)(CUdeviceptr, CUstream)>("cuMemFreeAsync", CUdeviceptr{0x2000}, CUstream{nullptr});
  Call<CUresult (*)(CUmemGenericAllocationHandle)>("cuMemRelease", CUmemGenericAllocationHandle{7});
  Call<CUresult (*)(CUarray)>("cuArrayDestroy", reinterpret_cast<CUarray>(0x3000));
  Call<CUresult (*)(CUmipmappedArray)>("cuMipmappedArrayDestroy", reinterpret_cast<CUmipmappedArray>(0x4000));
  Call<CUresult (*)(CUdeviceptr*, size_t, CUstream)>("cuMemAllocAsync", &pointer, size_t{1} << 20, CUstream{nullptr});
  Call<CUresult (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2", &pointer, size_t{1} << 20);
  Call<CUresult (*)(CUarray*, const CUDA_ARRAY_DESCRIPTOR*)>("cuArrayCreate_v2", &array,
                                                             static_cast<const CUDA_ARRAY_DESCRIPTOR*>(&descriptor));
  Call<CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long)>(
      "cuMemCreate", &handle, size_t{2} << 20, static_cast<const CUmemAllocationProp*>(&prop), 0ULL);
  std::printf("done\n");
  return 0;
}
