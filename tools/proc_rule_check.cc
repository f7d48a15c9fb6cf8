// gpuslice-proc-rule-check: asks whichever libcuda.so.1 the loader finds to resolve every
// (symbol, version) of cudaTypedefs.h through cuGetProcAddress_v2, in legacy and per-thread
// mode, and compares each answer with the function the version rule names (dlsym of the
// expected export). On the simulated driver this checks the simulator; on a real driver it
// checks the rule gpuslice's interposer and simulator are built on (docs/simulator.md).
//
// Prints one JSON object: {"driver":..., "checked":N, "mismatches":M, "examples":[...]}.
// Exit 0 when every lookup matched, 1 on mismatches, 2 when no driver could be loaded.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/proc_rows.h"

int main(int argc, char** argv) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    std::fprintf(stderr, "gpuslice-proc-rule-check: cannot load libcuda.so.1: %s\n", dlerror());
    return 2;
  }
  auto get_proc = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(driver, "cuGetProcAddress_v2"));
  if (!get_proc) {
    std::fprintf(stderr, "gpuslice-proc-rule-check: libcuda.so.1 has no cuGetProcAddress_v2\n");
    return 2;
  }
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(get_proc), &info);

  nlohmann::json examples = nlohmann::json::array();
  size_t checked = 0, mismatches = 0;
  for (const gpuslice::ProcRow& row : gpuslice::kProcRows) {
    for (const bool per_thread : {false, true}) {
      const cuuint64_t flags = per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                          : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
      const std::string expected = (per_thread && *row.per_thread_name) ? row.per_thread_name : row.name;
      void* got = nullptr;
      CUdriverProcAddressQueryResult status{};
      const CUresult rc = get_proc(row.base, &got, row.version, flags, &status);
      void* want = dlsym(driver, expected.c_str());
      ++checked;
      if (got == want && (want != nullptr) == (rc == CUDA_SUCCESS)) continue;
      ++mismatches;
      if (examples.size() < 40) {
        Dl_info got_info{};
        const char* got_name = (got && dladdr(got, &got_info) && got_info.dli_sname) ? got_info.dli_sname : "";
        examples.push_back({{"symbol", row.base},
                            {"version", row.version},
                            {"per_thread", per_thread},
                            {"expected", expected},
                            {"expected_exported", want != nullptr},
                            {"result", static_cast<int>(rc)},
                            {"got", got_name}});
      }
    }
  }
  nlohmann::json out = {{"driver", info.dli_fname ? info.dli_fname : "?"},
                        {"checked", checked},
                        {"mismatches", mismatches},
                        {"examples", examples}};
  std::printf("%s\n", out.dump().c_str());
  return mismatches == 0 ? 0 : 1;
}
