// What each driver (and NVML) entry point of the simulated libraries costs the calling thread,
// and how often each was called (docs/simulator.md, "What calls cost").
//
// A real driver's calls are not free: a launch costs about 2 µs of host time, recording an event
// about as much. A simulator whose calls cost nothing hides every driver call a sharing layer
// adds. Every exported entry point begins with GPUSLICE_SIM_ENTRY(), which — while a cost profile
// is set (GPUSLICE_SIM_CALL_COSTS) — busy-waits on the calling thread for the entry point's cost
// (one table lookup, no lock), and — while GPUSLICE_SIM_CALL_COUNTS names a file — counts the
// call; the counts are appended to that file as one JSON line per library when the process
// exits. Calls the simulated library makes to its own entry points are neither charged nor
// counted again: only the outermost entry on a thread is.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace gpuslice::sim {

// What an entry point costs, by what it does.
enum class CallKind : uint8_t {
  kLaunch,       // kernel and graph launches, host functions
  kEventRecord,  // cuEventRecord*
  kQuery,        // cuEventQuery, cuStreamQuery*
  kSync,         // *Synchronize: the host's part, before the wait itself
  kContext,      // current-context get/set/push/pop, cuCtxGetDevice, cuStreamGetCtx
  kAllocation,   // device memory, arrays and VMM handles: allocate and free
  kNvml,         // every NVML call
  kOther,
};
inline constexpr int kCallKinds = 8;

// The kind of the entry point named `name`.
CallKind KindOfEntryPoint(const char* name);

// Costs in nanoseconds per kind, and per entry point where one is set by name.
struct CallCosts {
  uint32_t by_kind[kCallKinds] = {};
};

// Parses a GPUSLICE_SIM_CALL_COSTS value: "off" (or empty), "default", "double", optionally
// followed by ",<kind or entry point>=<ns>" overrides ("default,event_record=4000,
// cuStreamQuery=800"). Entry-point overrides are returned in `by_name` (name=ns pairs, joined by
// commas) for the registry to apply. False, with `error` set, for anything else.
bool ParseCallCosts(const std::string& value, CallCosts* costs, std::string* by_name, std::string* error);
// The default profile: the published host costs of a driver's calls (docs/simulator.md).
CallCosts DefaultCallCosts();

namespace call_model {

using EntryIndex = uint16_t;
inline constexpr EntryIndex kMaxEntries = 512;

// Assigns `name` an index (at its entry point's first call; a race may assign two).
EntryIndex Register(const char* name) noexcept;
// The index of an entry point, registered at its first call. No guarded static: see call_model.cc.
inline EntryIndex IndexOf(std::atomic<uint16_t>* cached, const char* name) noexcept {
  const uint16_t known = cached->load(std::memory_order_acquire);
  if (known != 0) return static_cast<EntryIndex>(known - 1);
  const EntryIndex index = Register(name);
  cached->store(static_cast<uint16_t>(index + 1), std::memory_order_release);
  return index;
}
// The outermost entry into the library on this thread: charged and counted.
void Enter(EntryIndex index) noexcept;
// How deep this thread is inside the library's entry points.
extern thread_local uint32_t t_depth;
// Set once a cost profile or a counts file is in use.
extern std::atomic<bool> g_active;
// The library's name in the counts file ("cuda", "nvml"); set by each library.
void SetLibraryName(const char* name) noexcept;
// False (after one line on stderr naming GPUSLICE_SIM_CALL_COSTS and the valid values) when the
// variable's value is invalid; cuInit then fails, so no run is measured with the wrong costs.
bool SettingsValid() noexcept;

// Marks the outermost entry of the library on this thread.
class Scope {
 public:
  explicit Scope(EntryIndex index) noexcept {
    if (t_depth++ == 0 && g_active.load(std::memory_order_relaxed)) Enter(index);
  }
  ~Scope() { --t_depth; }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
};

}  // namespace call_model
}  // namespace gpuslice::sim

// The first statement of every exported entry point of the simulated libraries (a test checks).
#define GPUSLICE_SIM_ENTRY()                                         \
  static std::atomic<uint16_t> gpuslice_sim_entry_index{0};          \
  const ::gpuslice::sim::call_model::Scope gpuslice_sim_entry_scope( \
      ::gpuslice::sim::call_model::IndexOf(&gpuslice_sim_entry_index, __func__))
