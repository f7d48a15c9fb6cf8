#include "shim/real_driver.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string_view>

#include "common/mutex_lock.h"
#include "common/proc_rows.h"
#include "common/unique_fd.h"
#include "shim/log.h"
#include "shim/options.h"

namespace gpuslice::shim {
namespace {

using DlsymFn = DlsymFunction;

struct NamedHook {
  const char* name;
  void* hook;
};

// Sorted by name at first use.
NamedHook* SortedHooks(size_t* count) {
  static NamedHook hooks[] = {
#define GPUSLICE_NAMED(name) {#name, reinterpret_cast<void*>(&::name)},
      GPUSLICE_DRIVER_HOOKS(GPUSLICE_NAMED) GPUSLICE_NVML_HOOKS(GPUSLICE_NAMED)
#undef GPUSLICE_NAMED
  };
  static std::once_flag sorted;
  std::call_once(sorted, [] {
    std::sort(std::begin(hooks), std::end(hooks),
              [](const NamedHook& a, const NamedHook& b) { return std::strcmp(a.name, b.name) < 0; });
  });
  *count = std::size(hooks);
  return hooks;
}

// The export name the version rule gives for (symbol, version, flags), or nullptr (the rows of
// common/proc_rows.h are sorted by base name then version).
const char* ExportNameByRule(const char* symbol, int version, cuuint64_t flags) {
  const ProcRow* first =
      std::lower_bound(std::begin(kProcRows), std::end(kProcRows), symbol,
                       [](const ProcRow& row, const char* s) { return std::strcmp(row.base, s) < 0; });
  const ProcRow* chosen = nullptr;
  for (const ProcRow* row = first; row != std::end(kProcRows) && std::strcmp(row->base, symbol) == 0; ++row) {
    if (row->version <= version) chosen = row;
  }
  if (!chosen) return nullptr;
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && *chosen->per_thread_name)
    return chosen->per_thread_name;
  return chosen->name;
}

// Not instrumented, and calls nothing that is: a sanitizer runtime resolves its interceptors
// with dlsym(RTLD_NEXT, ...) — our dlsym, which comes here — before it has initialised.
__attribute__((no_sanitize("address", "undefined", "thread"))) DlsymFn LoadRealDlsym() {
  static DlsymFn real = nullptr;
  DlsymFn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
  if (fn) return fn;
  // dlvsym is not interposed, so this finds glibc's dlsym (the current version first).
  void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  fn = reinterpret_cast<DlsymFn>(p);
  __atomic_store_n(&real, fn, __ATOMIC_RELEASE);
  return fn;
}

// The base address of the object that defines `address`.
const void* ObjectBase(const void* address) {
  Dl_info info{};
  return dladdr(address, &info) ? info.dli_fbase : nullptr;
}

// Set when a GPUSLICE_* variable is invalid: a configuration error, not a missing driver.
std::atomic<bool> g_options_invalid{false};

RealDriver* LoadDriver() {
  // Every option is checked before a driver is looked for: a typo is reported even when none
  // can be loaded. With a bad option the driver is still loaded if it can be (quietly: the
  // option's line is the one that matters), so that cuGetProcAddress works and it is cuInit that
  // fails closed — unless GPUSLICE_DRIVER_LIBRARY itself is the bad one.
  bool valid = false;
  const ShimOptions& options = ProcessOptions(&valid);
  g_options_invalid.store(!valid);
  if (!valid && options.driver_library.empty() && std::getenv("GPUSLICE_DRIVER_LIBRARY")) return nullptr;
  const std::string path = options.driver_library.empty() ? "libcuda.so.1" : options.driver_library;
  // Owned until every check passed: a library refused below is closed again and its RealDriver
  // freed; an accepted driver stays loaded for the life of the process.
  UniqueDl library(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!library) {
    if (valid) LogError("cannot load the CUDA driver %s: %s", path.c_str(), dlerror());
    return nullptr;
  }
  void* handle = library.get();
  auto driver = std::make_unique<RealDriver>();
  driver->handle = handle;
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map) driver->path = map->l_name;
  void* init = RealDlsym(handle, "cuInit");
  if (!init) {
    LogError("%s is not a CUDA driver (no cuInit)", driver->path.c_str());
    return nullptr;
  }
  // Forwarding to ourselves would recurse forever: refuse a "driver" that is gpuslice.
  if (ObjectBase(init) == ObjectBase(reinterpret_cast<const void*>(&LoadDriver))) {
    LogError(
        "the CUDA driver found as %s is libgpuslice.so itself; set GPUSLICE_DRIVER_LIBRARY to the "
        "real driver",
        path.c_str());
    return nullptr;
  }
#define GPUSLICE_RESOLVE(name) driver->name = reinterpret_cast<decltype(driver->name)>(RealDlsym(handle, #name));
  GPUSLICE_DRIVER_HOOKS(GPUSLICE_RESOLVE)
  GPUSLICE_DRIVER_CALLS(GPUSLICE_RESOLVE)
#undef GPUSLICE_RESOLVE
  if (!driver->cuGetProcAddress_v2 || !driver->cuCtxGetDevice || !driver->cuDeviceGetUuid_v2 ||
      !driver->cuDeviceTotalMem_v2 || !driver->cuMemGetInfo_v2 || !driver->cuCtxGetCurrent ||
      !driver->cuCtxSetCurrent || !driver->cuCtxSynchronize || !driver->cuCtxPushCurrent_v2 ||
      !driver->cuCtxPopCurrent_v2) {
    LogError("the CUDA driver %s lacks entry points gpuslice needs (CUDA 12 or newer is required)",
             driver->path.c_str());
    return nullptr;
  }
  (void)library.release();
  return driver.release();
}

}  // namespace

__attribute__((no_sanitize("address", "undefined", "thread"))) DlsymFunction GlibcDlsym() { return LoadRealDlsym(); }

bool OptionsInvalid() { return g_options_invalid.load(); }

void* RealDlsym(void* handle, const char* name) {
  DlsymFn fn = LoadRealDlsym();
  return fn ? fn(handle, name) : nullptr;
}

namespace {
Mutex g_driver_load_mutex;  // one load of the real driver at a time
Mutex g_nvml_load_mutex;    // one lookup of the real NVML at a time
}  // namespace

void LockLoadersForFork() NO_THREAD_SAFETY_ANALYSIS {
  g_driver_load_mutex.Lock();
  g_nvml_load_mutex.Lock();
}

void UnlockLoadersAfterFork() NO_THREAD_SAFETY_ANALYSIS {
  g_nvml_load_mutex.Unlock();
  g_driver_load_mutex.Unlock();
}

namespace real_driver_internal {

std::atomic<const RealDriver*> g_loaded{nullptr};

const RealDriver* Load() {
  static std::atomic<bool> failed{false};
  if (failed.load()) return nullptr;
  MutexLock lock(&g_driver_load_mutex);
  if (const RealDriver* d = g_loaded.load()) return d;
  const RealDriver* d = LoadDriver();
  if (!d) {
    failed.store(true);
    return nullptr;
  }
  g_loaded.store(d, std::memory_order_release);
  return d;
}

}  // namespace real_driver_internal

const RealNvml* RealNvmlIfLoaded() {
  static std::atomic<RealNvml*> loaded{nullptr};
  if (RealNvml* n = loaded.load(std::memory_order_acquire)) return n;
  MutexLock lock(&g_nvml_load_mutex);
  if (RealNvml* n = loaded.load()) return n;
  void* handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!handle) return nullptr;
  auto* nvml = new RealNvml();
#define GPUSLICE_RESOLVE(name) nvml->name = reinterpret_cast<decltype(nvml->name)>(RealDlsym(handle, #name));
  GPUSLICE_NVML_HOOKS(GPUSLICE_RESOLVE)
  GPUSLICE_NVML_CALLS(GPUSLICE_RESOLVE)
#undef GPUSLICE_RESOLVE
  loaded.store(nvml, std::memory_order_release);
  return nvml;
}

void* HookByName(const char* name) {
  size_t count = 0;
  NamedHook* hooks = SortedHooks(&count);
  NamedHook* end = hooks + count;
  NamedHook* it =
      std::lower_bound(hooks, end, name, [](const NamedHook& h, const char* n) { return std::strcmp(h.name, n) < 0; });
  return (it != end && std::strcmp(it->name, name) == 0) ? it->hook : nullptr;
}

void* SubstituteHook(const char* symbol, int version, cuuint64_t flags, void* found) {
  const RealDriver* real = Real();
  if (!real || !found || !symbol) return found;
    // By address: the driver handed out exactly one of the functions we intercept.
#define GPUSLICE_BY_ADDRESS(name) \
  if (found == reinterpret_cast<void*>(real->name)) return reinterpret_cast<void*>(&::name);
  GPUSLICE_DRIVER_HOOKS(GPUSLICE_BY_ADDRESS)
#undef GPUSLICE_BY_ADDRESS
  // By the version rule: a driver may hand out internal entry points rather than its exports.
  // sabotage-point: proc-address-version-rule-off
  if (const char* name = ExportNameByRule(symbol, version, flags)) {
    if (void* hook = HookByName(name)) return hook;
  }
  return found;
}

}  // namespace gpuslice::shim
