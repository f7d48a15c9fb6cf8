// gpuslice-test-proc-hooks: obtains cuGetProcAddress as libcudart does (dlsym(handle,
// "cuGetProcAddress_v2"), then "cuGetProcAddress" through it) and asks it, through that, for
// every driver function libgpuslice.so intercepts (shim/hook_list.h): at each (base, version,
// stream mode) of the generated cuGetProcAddress table whose answer by the version rule is that
// function. Reports where each answer leads, on one JSON line:
//
//   {"event":"proc_hooks","checked":N,"into_shim":K,"exports":E,"absent":[...],"missed":[...]}
//
// into_shim: answers that are the shim's hook of exactly that name; exports: answers that are the
// driver's exported function of that name; absent: lookups the driver answered "not found" (a
// function it does not implement: the shim must not invent one); missed: every other lookup whose
// answer is not the shim's hook. Lookups are named "<base>@<version>[_ptsz]". Exit 0 when every
// answer found is the shim's hook, 1 otherwise, 2 when no driver was found.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/proc_rows.h"
#include "shim/hook_list.h"

namespace {

constexpr const char* kHooks[] = {
#define GPUSLICE_HOOK_NAME(name) #name,
    GPUSLICE_DRIVER_HOOKS(GPUSLICE_HOOK_NAME)
#undef GPUSLICE_HOOK_NAME
};

std::string Basename(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

int main() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    std::fprintf(stderr, "gpuslice-test-proc-hooks: cannot load libcuda.so.1: %s\n", dlerror());
    return 2;
  }
  auto first = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(driver, "cuGetProcAddress_v2"));
  void* found = nullptr;
  if (!first || first("cuGetProcAddress", &found, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, nullptr) != CUDA_SUCCESS ||
      !found) {
    std::fprintf(stderr, "gpuslice-test-proc-hooks: no cuGetProcAddress\n");
    return 2;
  }
  auto get_proc_address = reinterpret_cast<PFN_cuGetProcAddress_v12000>(found);
  int checked = 0, into_shim = 0, exports = 0;
  std::vector<std::string> missed, absent;
  for (const char* hook : kHooks) {
    for (const gpuslice::ProcRow& row : gpuslice::kProcRows) {
      for (const bool per_thread : {false, true}) {
        const char* answer_name = per_thread ? row.per_thread_name : row.name;
        if (std::strcmp(answer_name, hook) != 0) continue;
        const cuuint64_t flags = per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                            : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        void* pfn = nullptr;
        CUdriverProcAddressQueryResult status{};
        const CUresult rc = get_proc_address(row.base, &pfn, row.version, flags, &status);
        ++checked;
        const std::string lookup = std::string(row.base) + "@" + std::to_string(row.version) +
                                   (per_thread ? "_ptsz" : "");
        if (rc == CUDA_ERROR_NOT_FOUND && !pfn && status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) {
          absent.push_back(lookup);
          continue;
        }
        Dl_info info{};
        const bool named = rc == CUDA_SUCCESS && pfn && dladdr(pfn, &info) && info.dli_sname &&
                           std::strcmp(info.dli_sname, hook) == 0 && info.dli_fname;
        const bool in_shim = named && Basename(info.dli_fname) == "libgpuslice.so";
        if (in_shim) ++into_shim;
        if (named && Basename(info.dli_fname).rfind("libcuda.so", 0) == 0) ++exports;
        if (!in_shim) missed.push_back(lookup);
      }
    }
  }
  auto json_list = [](const std::vector<std::string>& names) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "\"" : ",\"") + n + "\"";
    return "[" + list + "]";
  };
  std::printf(
      "{\"event\":\"proc_hooks\",\"hooks\":%zu,\"checked\":%d,\"into_shim\":%d,\"exports\":%d,"
      "\"absent\":%s,\"missed\":%s}\n",
      std::size(kHooks), checked, into_shim, exports, json_list(absent).c_str(), json_list(missed).c_str());
  return missed.empty() && into_shim > 0 ? 0 : 1;
}
