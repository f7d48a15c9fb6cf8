#include "workload/driver_table.h"

#include <dlfcn.h>

namespace gpuslice::workload {
namespace {

constexpr char kDriverLibrary[] = "libcuda.so.1";

// `lookup` is passed by value: for the first entry, `slot` is where it came from.
bool Resolve(PFN_cuGetProcAddress_v12000 lookup, const DriverTable& table, const char* name, void** slot,
             std::string* error) {
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  void* entry = nullptr;
  const CUresult result = lookup(name, &entry, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found);
  *slot = entry;
  if (result == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS && entry != nullptr) return true;
  if (result == CUDA_ERROR_STUB_LIBRARY) {
    *error = std::string(kDriverLibrary) +
             " is the CUDA toolkit's stub library, not a driver (CUDA_ERROR_STUB_LIBRARY)";
    return false;
  }
  *error = std::string("the CUDA driver has no usable ") + name + " for CUDA " + std::to_string(CUDA_VERSION) +
           " (cuGetProcAddress returned " + table.ErrorName(result) +
           (found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? ", driver too old)" : ")");
  *slot = nullptr;
  return false;
}

}  // namespace

std::string DriverTable::ErrorName(CUresult result) const {
  const char* name = nullptr;
  if (cuGetErrorName != nullptr && cuGetErrorName(result, &name) == CUDA_SUCCESS && name != nullptr) return name;
  // What loading can meet before cuGetErrorName is there to ask.
  switch (result) {
    case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    default: return "CUresult " + std::to_string(static_cast<int>(result));
  }
}

bool LoadDriverTable(DriverTable* table, std::string* error) {
  *table = DriverTable{};
  void* library = dlopen(kDriverLibrary, RTLD_NOW);
  if (library == nullptr) {
    const char* why = dlerror();
    *error = std::string("cannot load the CUDA driver: ") + (why ? why : kDriverLibrary);
    return false;
  }
  // Only the bootstrap comes from dlsym; as in the runtime, cuGetProcAddress is then looked up
  // through itself and everything else through what that lookup returned.
  table->cuGetProcAddress = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(library, "cuGetProcAddress_v2"));
  if (table->cuGetProcAddress == nullptr) {
    *error = std::string("the CUDA driver ") + kDriverLibrary +
             " does not export cuGetProcAddress_v2 (CUDA 12.0 or newer needed)";
    return false;
  }
#define GPUSLICE_WORKLOAD_RESOLVE(name, pfn) \
  if (!Resolve(table->cuGetProcAddress, *table, #name, reinterpret_cast<void**>(&table->name), error)) return false;
  GPUSLICE_WORKLOAD_ENTRY_POINTS(GPUSLICE_WORKLOAD_RESOLVE)
#undef GPUSLICE_WORKLOAD_RESOLVE
  return true;
}

}  // namespace gpuslice::workload
