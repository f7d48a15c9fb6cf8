// Internal entry points: one trampoline per export name of the generated cuGetProcAddress table,
// typed by its PFN typedef, that tail-calls the exported function it stands for. They live in
// this library (as a real driver's internal functions do in libcuda.so) but have no dynamic
// symbol: dladdr finds no name for them and no dlsym() returns them.
#include "internal_entry_points.h"

#include "driver_api.h"  // first of the CUDA headers: the old and per-thread names must be declared

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string_view>

namespace gpuslice::sim {
namespace {

// One index per export name cuda.h declares.
enum EntryIndex : size_t {
#define GPUSLICE_PROC_DECLARED(export_name, pfn) kEntry_##export_name,
#include "proc_table.inc"
#undef GPUSLICE_PROC_DECLARED
  kEntryCount
};

// The exported function each trampoline forwards to, stored before the trampoline is first
// handed out (so never read unset).
std::atomic<void*> g_targets[kEntryCount];

template <size_t Index, typename Pfn>
struct Trampoline;

template <size_t Index, typename... Args>
struct Trampoline<Index, CUresult(CUDAAPI*)(Args...)> {
  static CUresult CUDAAPI Call(Args... args) {
    auto target = reinterpret_cast<CUresult(CUDAAPI*)(Args...)>(g_targets[Index].load(std::memory_order_acquire));
    return target(args...);
  }
};

struct Entry {
  std::string_view name;
  size_t index;
  void* trampoline;
};

// Sorted by name (the generator emits them sorted; checked at first use).
const Entry kEntries[] = {
#define GPUSLICE_PROC_DECLARED(export_name, pfn) \
  {#export_name, kEntry_##export_name, reinterpret_cast<void*>(&Trampoline<kEntry_##export_name, pfn>::Call)},
#include "proc_table.inc"
#undef GPUSLICE_PROC_DECLARED
};

bool EntriesSorted() {
  static const bool sorted = std::is_sorted(std::begin(kEntries), std::end(kEntries),
                                            [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return sorted;
}

ProcAddressMode ReadMode() {
  const char* value = std::getenv("GPUSLICE_SIM_PROC_ADDRESS");
  if (value == nullptr || *value == '\0' || std::strcmp(value, "exports") == 0) return ProcAddressMode::kExports;
  if (std::strcmp(value, "internal") == 0) return ProcAddressMode::kInternal;
  std::fprintf(stderr,
               "gpuslice-sim: invalid GPUSLICE_SIM_PROC_ADDRESS='%s'; expected exports or internal, "
               "e.g. GPUSLICE_SIM_PROC_ADDRESS=internal\n",
               value);
  return ProcAddressMode::kInvalid;
}

}  // namespace

ProcAddressMode CurrentProcAddressMode() {
  static const ProcAddressMode mode = ReadMode();
  return mode;
}

void* InternalEntryPoint(const char* name, void* exported) {
  if (name == nullptr || exported == nullptr || !EntriesSorted()) return nullptr;
  const std::string_view wanted(name);
  const Entry* it = std::lower_bound(std::begin(kEntries), std::end(kEntries), wanted,
                                     [](const Entry& e, std::string_view n) { return e.name < n; });
  if (it == std::end(kEntries) || it->name != wanted) return nullptr;
  g_targets[it->index].store(exported, std::memory_order_release);
  return it->trampoline;
}

}  // namespace gpuslice::sim
