// cuGetProcAddress(_v2) and cuGetExportTable.
//
// The CUDA runtime reaches every driver entry point through cuGetProcAddress, naming a base symbol
// ("cuMemAlloc") and the CUDA version it was built for. The driver answers with the entry point of
// the largest PFN_<base>_v<N> version <= the requested one (or its _ptsz/_ptds twin when asked
// for per-thread default stream semantics). The (base, version) -> export name table is generated
// from cudaTypedefs.h by tools/gen_proc_table.py; the function itself is whatever this library
// exports under that name, so a function the simulated driver does not implement is reported as
// not found rather than handed out as a pointer to something else. With
// GPUSLICE_SIM_PROC_ADDRESS=internal the answer is an internal entry point that forwards to that
// export instead of the export itself, as some real drivers answer (internal_entry_points.h).
#include "driver_api.h"
#include "internal_entry_points.h"

#include <dlfcn.h>

#include <algorithm>
#include <iterator>
#include <string_view>

namespace {

struct ProcEntry {
  std::string_view base;
  int version;
  const char* export_name;
  const char* per_thread_export_name;  // "" when this version has no _ptsz/_ptds twin
};

constexpr ProcEntry kProcTable[] = {
#define GPUSLICE_PROC(base, version, export_name, per_thread_export_name, pfn) \
  {base, version, export_name, per_thread_export_name},
#include "proc_table.inc"
#undef GPUSLICE_PROC
};

constexpr bool EntryBefore(const ProcEntry& a, const ProcEntry& b) {
  return a.base != b.base ? a.base < b.base : a.version < b.version;
}
// The lookup binary-searches the table as generated; catch a generator that stops sorting it.
static_assert(std::is_sorted(std::begin(kProcTable), std::end(kProcTable), EntryBefore));

constexpr cuuint64_t kKnownFlags = CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

// Anchors this library's own address. Deliberately not an exported function: the address of an
// exported symbol taken inside a shared library resolves through the GOT, and so would name an
// interposer (an LD_PRELOADed library exporting the same driver symbol) instead of this file.
const char kSelfAnchor = 0;

// This library as the dynamic linker knows it: its handle, for dlsym, and its load address.
struct Self {
  void* handle = nullptr;
  void* base = nullptr;
};

// Found from our own address: not RTLD_DEFAULT, which would find an interposer's definitions
// first, and not dlopen("libcuda.so.1"), which may name an interposer carrying that SONAME.
const Self& ThisLibrary() noexcept {
  static const Self self = [] {
    Self s;
    Dl_info info{};
    if (dladdr(&kSelfAnchor, &info) == 0 || info.dli_fname == nullptr) return s;
    s.handle = dlopen(info.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
    s.base = info.dli_fbase;
    return s;
  }();
  return self;
}

// The function this library defines under `name`, or nullptr. dlsym on our handle also searches
// our dependencies, so insist that the definition found is in this very file.
void* ExportedFunction(const char* name) noexcept {
  const Self& self = ThisLibrary();
  if (self.handle == nullptr) return nullptr;
  void* function = dlsym(self.handle, name);
  Dl_info found{};
  if (function == nullptr || dladdr(function, &found) == 0 || found.dli_fbase != self.base) return nullptr;
  return function;
}

// The table entry of the largest version of `base` <= `version`; nullptr with *status set when
// there is none.
const ProcEntry* FindEntry(std::string_view base, int version, CUdriverProcAddressQueryResult* status) noexcept {
  const ProcEntry* first = std::lower_bound(std::begin(kProcTable), std::end(kProcTable), base,
                                            [](const ProcEntry& e, std::string_view b) { return e.base < b; });
  const ProcEntry* last = first;
  while (last != std::end(kProcTable) && last->base == base) ++last;
  if (first == last) {
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return nullptr;
  }
  // Versions ascend within a base: the answer is the entry before the first one too new.
  const ProcEntry* newer =
      std::upper_bound(first, last, version, [](int v, const ProcEntry& e) { return v < e.version; });
  if (newer == first) {
    *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return nullptr;
  }
  return newer - 1;
}

CUresult Lookup(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                CUdriverProcAddressQueryResult* symbolStatus) noexcept {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult result = CUDA_ERROR_INVALID_VALUE;
  void* function = nullptr;
  // Both stream modes at once is a contradiction, not a choice: rejected like an unknown bit.
  const bool bad_flags = (flags & ~kKnownFlags) != 0 || flags == kKnownFlags;
  const gpuslice::sim::ProcAddressMode mode = gpuslice::sim::CurrentProcAddressMode();
  // A misconfigured simulator answers nothing rather than silently the default.
  if (symbol != nullptr && pfn != nullptr && !bad_flags && mode != gpuslice::sim::ProcAddressMode::kInvalid) {
    result = CUDA_ERROR_NOT_FOUND;
    if (const ProcEntry* entry = FindEntry(symbol, cudaVersion, &status)) {
      const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 &&
                              entry->per_thread_export_name[0] != '\0';
      const char* name = per_thread ? entry->per_thread_export_name : entry->export_name;
      function = ExportedFunction(name);
      // sabotage-point: sim-internal-entry-points-off
      if (function != nullptr && mode == gpuslice::sim::ProcAddressMode::kInternal) {
        // Only a name cuda.h does not declare has no trampoline (and cannot be defined here).
        if (void* internal = gpuslice::sim::InternalEntryPoint(name, function)) function = internal;
      }
      if (function != nullptr) {
        status = CU_GET_PROC_ADDRESS_SUCCESS;
        result = CUDA_SUCCESS;
      }
    }
  }
  if (pfn != nullptr) *pfn = function;
  if (symbolStatus != nullptr) *symbolStatus = status;
  return result;
}

}  // namespace

CUresult CUDAAPI cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult* symbolStatus) try {
  GPUSLICE_SIM_ENTRY();
  return Lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) try {
  GPUSLICE_SIM_ENTRY();
  return Lookup(symbol, pfn, cudaVersion, flags, nullptr);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuGetExportTable(const void** ppExportTable, const CUuuid* pExportTableId) try {
  GPUSLICE_SIM_ENTRY();
  // The runtime's private tables have no meaning for a simulated driver (which is also why no
  // simulated driver can host libcudart).
  if (ppExportTable != nullptr) *ppExportTable = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
