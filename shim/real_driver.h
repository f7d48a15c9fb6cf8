// The real CUDA driver (and NVML) behind the shim: loaded at the first CUDA call, never before,
// from GPUSLICE_DRIVER_LIBRARY or wherever the dynamic loader finds libcuda.so.1 — and never
// gpuslice itself. Every pointer is typed by the declaration of the name it was looked up by.
#pragma once

#include <atomic>

#include <string>

#include "shim/driver_api.h"
#include "shim/hook_list.h"

namespace gpuslice::shim {

struct RealDriver {
#define GPUSLICE_REAL_POINTER(name) decltype(&::name) name = nullptr;
  GPUSLICE_DRIVER_HOOKS(GPUSLICE_REAL_POINTER)
  GPUSLICE_DRIVER_CALLS(GPUSLICE_REAL_POINTER)
#undef GPUSLICE_REAL_POINTER
  void* handle = nullptr;
  std::string path;  // where it was loaded from
};

struct RealNvml {
#define GPUSLICE_REAL_POINTER(name) decltype(&::name) name = nullptr;
  GPUSLICE_NVML_HOOKS(GPUSLICE_REAL_POINTER)
  GPUSLICE_NVML_CALLS(GPUSLICE_REAL_POINTER)
#undef GPUSLICE_REAL_POINTER
};

// The real driver, loading it on first use. nullptr (and one line on stderr, once) when it
// cannot be loaded or is gpuslice itself. Inline once loaded: every hook asks, the launch hooks
// twice.
namespace real_driver_internal {
extern std::atomic<const RealDriver*> g_loaded;
const RealDriver* Load();
}  // namespace real_driver_internal
inline const RealDriver* Real() {
  if (const RealDriver* d = real_driver_internal::g_loaded.load(std::memory_order_acquire)) return d;
  return real_driver_internal::Load();
}
// Held over a fork() by the shim's fork handlers (shim/shim_state.cc): a fork while another thread
// loads the driver or looks up NVML waits for it, so the child never inherits either lock held.
void LockLoadersForFork();
void UnlockLoadersAfterFork();
// True when Real() failed because a GPUSLICE_* variable is invalid (cuInit then fails closed
// rather than reporting no device).
bool OptionsInvalid();
// The real NVML if the process has loaded libnvidia-ml.so.1 (it is never loaded by gpuslice).
const RealNvml* RealNvmlIfLoaded();

// glibc's dlsym, not gpuslice's interposed one. noexcept: a noexcept caller (our dlsym) may then
// forward to it with a sibling call; calling a possibly-throwing pointer would need a frame of
// its own for std::terminate, and glibc would see gpuslice as the caller of an RTLD_NEXT lookup.
using DlsymFunction = void* (*)(void*, const char*) noexcept;
DlsymFunction GlibcDlsym();
void* RealDlsym(void* handle, const char* name);

// Our hook for a driver/NVML export name (nullptr when not intercepted).
void* HookByName(const char* name);
// Our hook for what the real cuGetProcAddress returned for (symbol, version, flags): matched
// by address first, else by the version rule (docs/interposition.md). `found` when none.
void* SubstituteHook(const char* symbol, int version, cuuint64_t flags, void* found);

}  // namespace gpuslice::shim
