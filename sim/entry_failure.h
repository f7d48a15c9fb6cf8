// What an exported entry point of the simulated driver or NVML returns when its body throws
// (memory exhausted, a thread that cannot start, a bug): an error code, as a real driver returns
// one. A C++ exception must never cross the C API: a C caller cannot catch it, and it would abort
// the process. Every entry point is therefore a function-try-block whose handler returns
// EntryFailed<its return type>(__func__) (scripts/check-sim-entry-prologue.py checks each one):
//
//   CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) try {
//     GPUSLICE_SIM_ENTRY();
//     ...
//   } catch (...) {
//     return EntryFailed<CUresult>(__func__);
//   }
//
// Nothing is added to the way in (no lock, no guarded static, no call: a try block costs nothing
// until something throws), so the call-cost model and a fork() during a first call are as before.
#pragma once

namespace gpuslice::sim {

enum class EntryFailure {
  kOutOfMemory,      // std::bad_alloc
  kOperatingSystem,  // std::system_error: a thread or a lock the system refused
  kOther,
};

// Only inside a catch handler: what is being handled, after one line on stderr naming `entry` and
// the exception. A cancelled thread's unwinding (abi::__forced_unwind) is rethrown: it must go on.
EntryFailure CurrentEntryFailure(const char* entry);

// The error code of each return type: CUresult (sim/driver/driver_api.h), nvmlReturn_t and
// const char* (sim/nvml/nvml_entry.h).
template <typename R>
R EntryFailed(const char* entry);

}  // namespace gpuslice::sim
