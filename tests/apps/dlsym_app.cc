// gpuslice-test-dlsym: a program that does not link libcuda and finds every driver entry point at
// run time, the ways the CUDA runtime and language bindings do:
//
//   gpuslice-test-dlsym <api> [--lookup handle|default|procaddress] [--per-thread] [options]
//     handle       dlopen("libcuda.so.1", RTLD_LOCAL), dlsym(handle, "<exact versioned name>")
//                  (the runtime's fallback path; a lookup on a handle ignores LD_PRELOAD)
//     default      dlopen(..., RTLD_GLOBAL), dlsym(RTLD_DEFAULT, "<exact versioned name>")
//     procaddress  dlsym(handle, "cuGetProcAddress_v2"), then "cuGetProcAddress" through it and
//                  every other entry point through that, by base name at CUDA_VERSION (libcudart)
//     --per-thread the _ptsz names, or CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
//   gpuslice-test-dlsym nvml       NVML memory info of device 0, through dlopen + dlsym
//   gpuslice-test-dlsym rtld-next  which objects dlsym(RTLD_NEXT / RTLD_DEFAULT, ...) resolve to
//
// Options and output of <api>: tests/apps/test_app.h.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "common/nvml_api.h"
#include "tests/apps/test_app.h"

namespace {

using gpuslice::testapp::DriverTable;
using gpuslice::testapp::JsonLine;

// field, exact exported name, its per-thread twin (or nullptr), base name for cuGetProcAddress.
#define TEST_DRIVER_ENTRIES(X)                                                                                       \
  X(init, "cuInit", nullptr, "cuInit")                                                                               \
  X(get_error_name, "cuGetErrorName", nullptr, "cuGetErrorName")                                                     \
  X(device_get, "cuDeviceGet", nullptr, "cuDeviceGet")                                                               \
  X(primary_ctx_retain, "cuDevicePrimaryCtxRetain", nullptr, "cuDevicePrimaryCtxRetain")                             \
  X(ctx_set_current, "cuCtxSetCurrent", nullptr, "cuCtxSetCurrent")                                                  \
  X(mem_get_info, "cuMemGetInfo_v2", nullptr, "cuMemGetInfo")                                                        \
  X(device_total_mem, "cuDeviceTotalMem_v2", nullptr, "cuDeviceTotalMem")                                            \
  X(mem_alloc, "cuMemAlloc_v2", nullptr, "cuMemAlloc")                                                               \
  X(mem_alloc_pitch, "cuMemAllocPitch_v2", nullptr, "cuMemAllocPitch")                                               \
  X(mem_alloc_managed, "cuMemAllocManaged", nullptr, "cuMemAllocManaged")                                            \
  X(mem_free, "cuMemFree_v2", nullptr, "cuMemFree")                                                                  \
  X(mem_alloc_async, "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemAllocAsync")                                   \
  X(mem_alloc_from_pool_async, "cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", "cuMemAllocFromPoolAsync") \
  X(mem_free_async, "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuMemFreeAsync")                                       \
  X(stream_synchronize, "cuStreamSynchronize", "cuStreamSynchronize_ptsz", "cuStreamSynchronize")                    \
  X(mem_pool_create, "cuMemPoolCreate", nullptr, "cuMemPoolCreate")                                                  \
  X(mem_pool_destroy, "cuMemPoolDestroy", nullptr, "cuMemPoolDestroy")                                               \
  X(mem_get_allocation_granularity, "cuMemGetAllocationGranularity", nullptr, "cuMemGetAllocationGranularity")       \
  X(mem_create, "cuMemCreate", nullptr, "cuMemCreate")                                                               \
  X(mem_release, "cuMemRelease", nullptr, "cuMemRelease")                                                            \
  X(mem_address_reserve, "cuMemAddressReserve", nullptr, "cuMemAddressReserve")                                      \
  X(mem_address_free, "cuMemAddressFree", nullptr, "cuMemAddressFree")                                               \
  X(mem_map, "cuMemMap", nullptr, "cuMemMap")                                                                        \
  X(mem_unmap, "cuMemUnmap", nullptr, "cuMemUnmap")                                                                  \
  X(mem_set_access, "cuMemSetAccess", nullptr, "cuMemSetAccess")                                                     \
  X(array_create, "cuArrayCreate_v2", nullptr, "cuArrayCreate")                                                      \
  X(array3d_create, "cuArray3DCreate_v2", nullptr, "cuArray3DCreate")                                                \
  X(array_destroy, "cuArrayDestroy", nullptr, "cuArrayDestroy")                                                      \
  X(mipmapped_array_create, "cuMipmappedArrayCreate", nullptr, "cuMipmappedArrayCreate")                             \
  X(mipmapped_array_destroy, "cuMipmappedArrayDestroy", nullptr, "cuMipmappedArrayDestroy")                          \
  X(ctx_create, "cuCtxCreate_v4", nullptr, "cuCtxCreate")                                                            \
  X(ctx_destroy, "cuCtxDestroy_v2", nullptr, "cuCtxDestroy")                                                         \
  X(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", nullptr, "cuDevicePrimaryCtxRelease")                       \
  X(primary_ctx_reset, "cuDevicePrimaryCtxReset_v2", nullptr, "cuDevicePrimaryCtxReset")                             \
  X(stream_create, "cuStreamCreate", nullptr, "cuStreamCreate")                                                      \
  X(stream_destroy, "cuStreamDestroy_v2", nullptr, "cuStreamDestroy")

void Complain(const std::string& line) { std::fprintf(stderr, "gpuslice-test-dlsym: %s\n", line.c_str()); }

// The file of the object that defines `address` ("" if none): tests check that the pointers a
// program obtains lead into libgpuslice.so.
std::string ObjectOf(const void* address) {
  Dl_info info{};
  if (!address || !dladdr(address, &info) || !info.dli_fname) return "";
  return info.dli_fname;
}

std::string Basename(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// The exported name of the function at `address` ("" if it has none).
std::string SymbolOf(const void* address) {
  Dl_info info{};
  if (!address || !dladdr(address, &info) || !info.dli_sname) return "";
  return info.dli_sname;
}

// Fills `d` by the chosen lookup; false (with a line on stderr) when an entry point is missing.
bool Lookup(const std::string& how, bool per_thread, DriverTable* d) {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | (how == "default" ? RTLD_GLOBAL : RTLD_LOCAL));
  if (!handle) {
    Complain(std::string("cannot load libcuda.so.1: ") + dlerror());
    return false;
  }
  if (how == "handle" || how == "default") {
    void* scope = how == "default" ? RTLD_DEFAULT : handle;
#define TEST_LOOKUP_BY_NAME(field, exact, ptsz, base)                                 \
  {                                                                                   \
    const char* name = (per_thread && ptsz) ? static_cast<const char*>(ptsz) : exact; \
    void* found = dlsym(scope, name);                                                 \
    if (!found) {                                                                     \
      Complain(std::string("dlsym found no ") + name);                                \
      return false;                                                                   \
    }                                                                                 \
    d->field = reinterpret_cast<decltype(d->field)>(found);                           \
  }
    TEST_DRIVER_ENTRIES(TEST_LOOKUP_BY_NAME)
#undef TEST_LOOKUP_BY_NAME
    return true;
  }
  if (how != "procaddress") {
    Complain("unknown --lookup '" + how + "'; expected handle, default or procaddress");
    return false;
  }
  // libcudart's sequence: the one symbol it takes from dlsym, then cuGetProcAddress from itself.
  auto first = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(handle, "cuGetProcAddress_v2"));
  if (!first) {
    Complain("dlsym found no cuGetProcAddress_v2");
    return false;
  }
  void* found = nullptr;
  CUdriverProcAddressQueryResult status{};
  if (first("cuGetProcAddress", &found, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !found) {
    Complain("cuGetProcAddress found no cuGetProcAddress");
    return false;
  }
  auto get_proc_address = reinterpret_cast<PFN_cuGetProcAddress_v12000>(found);
  const cuuint64_t flags = per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
#define TEST_LOOKUP_BY_PROC_ADDRESS(field, exact, ptsz, base)                                 \
  {                                                                                           \
    void* pfn = nullptr;                                                                      \
    if (get_proc_address(base, &pfn, CUDA_VERSION, flags, &status) != CUDA_SUCCESS || !pfn) { \
      Complain(std::string("cuGetProcAddress found no ") + base);                             \
      return false;                                                                           \
    }                                                                                         \
    d->field = reinterpret_cast<decltype(d->field)>(pfn);                                     \
  }
  TEST_DRIVER_ENTRIES(TEST_LOOKUP_BY_PROC_ADDRESS)
#undef TEST_LOOKUP_BY_PROC_ADDRESS
  return true;
}

// NVML as nvidia-smi and pynvml reach it: dlopen + dlsym, never linked.
int NvmlMemoryInfo() {
  void* handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    Complain(std::string("cannot load libnvidia-ml.so.1: ") + dlerror());
    return 2;
  }
  auto init = reinterpret_cast<decltype(&nvmlInit_v2)>(dlsym(handle, "nvmlInit_v2"));
  auto by_index =
      reinterpret_cast<decltype(&nvmlDeviceGetHandleByIndex_v2)>(dlsym(handle, "nvmlDeviceGetHandleByIndex_v2"));
  auto info_v1 = reinterpret_cast<decltype(&nvmlDeviceGetMemoryInfo)>(dlsym(handle, "nvmlDeviceGetMemoryInfo"));
  auto info_v2 = reinterpret_cast<decltype(&nvmlDeviceGetMemoryInfo_v2)>(dlsym(handle, "nvmlDeviceGetMemoryInfo_v2"));
  auto shutdown = reinterpret_cast<decltype(&nvmlShutdown)>(dlsym(handle, "nvmlShutdown"));
  if (!init || !by_index || !info_v1 || !info_v2 || !shutdown) {
    Complain("libnvidia-ml.so.1 lacks an entry point");
    return 2;
  }
  JsonLine line;
  line.Add("event", "nvml").Add("info_from", Basename(ObjectOf(reinterpret_cast<void*>(info_v1))));
  nvmlDevice_t device = nullptr;
  nvmlReturn_t rc = init();
  line.Add("init", static_cast<int>(rc));
  if (rc == NVML_SUCCESS) rc = by_index(0, &device);
  nvmlMemory_t v1{};
  const nvmlReturn_t rc1 = rc == NVML_SUCCESS ? info_v1(device, &v1) : rc;
  nvmlMemory_v2_t v2{};
  v2.version = nvmlMemory_v2;
  const nvmlReturn_t rc2 = rc == NVML_SUCCESS ? info_v2(device, &v2) : rc;
  line.AddRaw("v1", JsonLine()
                        .Add("rc", static_cast<int>(rc1))
                        .Add("total", uint64_t{v1.total})
                        .Add("free", uint64_t{v1.free})
                        .Add("used", uint64_t{v1.used})
                        .Text());
  line.AddRaw("v2", JsonLine()
                        .Add("rc", static_cast<int>(rc2))
                        .Add("total", uint64_t{v2.total})
                        .Add("reserved", uint64_t{v2.reserved})
                        .Add("free", uint64_t{v2.free})
                        .Add("used", uint64_t{v2.used})
                        .Text());
  line.Print();
  shutdown();
  return rc1 == NVML_SUCCESS && rc2 == NVML_SUCCESS ? 0 : 1;
}

// RTLD_NEXT is relative to the object that calls dlsym — this executable. The next object after
// it is the preloaded libgpuslice.so, so cuMemAlloc_v2 and dlsym must resolve *there*; were the
// shim's dlsym to let glibc see the shim as the caller, they would resolve past it (to nothing,
// or to libc's dlsym). puts is in libc either way.
int ReportRtldNext() {
  JsonLine()
      .Add("event", "rtld_next")
      .Add("puts", ObjectOf(dlsym(RTLD_NEXT, "puts")))
      .Add("cuMemAlloc_v2", ObjectOf(dlsym(RTLD_NEXT, "cuMemAlloc_v2")))
      .Add("dlsym", ObjectOf(dlsym(RTLD_NEXT, "dlsym")))
      .Add("default_cuMemAlloc_v2", ObjectOf(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2")))
      .Add("default_puts", ObjectOf(dlsym(RTLD_DEFAULT, "puts")))
      .Print();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "nvml") == 0) return NvmlMemoryInfo();
  if (argc >= 2 && std::strcmp(argv[1], "rtld-next") == 0) return ReportRtldNext();
  gpuslice::testapp::Options options;
  if (!gpuslice::testapp::ParseOptions(argc, argv, 1, {"--lookup"}, {"--per-thread"}, &options)) return 2;
  const std::string how = options.app_flags.count("--lookup") ? options.app_flags["--lookup"] : "handle";
  const bool per_thread = options.app_flags.count("--per-thread") > 0;
  DriverTable driver;
  if (!Lookup(how, per_thread, &driver)) return 2;
  JsonLine extra;
  extra.Add("lookup", how)
      .Add("per_thread", per_thread)
      .Add("mem_alloc_from", Basename(ObjectOf(reinterpret_cast<void*>(driver.mem_alloc))))
      .Add("mem_alloc_async_from", Basename(ObjectOf(reinterpret_cast<void*>(driver.mem_alloc_async))))
      .Add("mem_alloc_async_symbol", SymbolOf(reinterpret_cast<void*>(driver.mem_alloc_async)));
  return gpuslice::testapp::RunAllocations(driver, options, "dlsym", extra);
}
