// dlsym interposition: the one way to see a program that dlopen()s libcuda.so.1 and looks up
// entry points by name on that handle — the CUDA runtime's first step (dlsym of
// "cuGetProcAddress_v2") and its fallback path. A lookup on a specific handle ignores
// LD_PRELOAD, so without this the runtime would reach the real driver directly.
//
// Only names of functions gpuslice intercepts are touched, and only when the handle really
// resolves them; everything else goes straight to glibc. RTLD_NEXT lookups are forwarded by a
// tail call, so glibc still sees the caller's return address (RTLD_NEXT is relative to the
// calling object) — tests/shim/shim_interposition_test.cc checks this.
#include <dlfcn.h>

#include "shim/real_driver.h"

namespace {

// Not instrumented either: a sanitizer runtime calls dlsym before it has initialised.
__attribute__((no_sanitize("address", "undefined", "thread"))) bool MaybeIntercepted(const char* name) {
  return name && ((name[0] == 'c' && name[1] == 'u') || (name[0] == 'n' && name[1] == 'v' && name[2] == 'm'));
}

// The load address of the object holding `address` (nullptr if none).
const void* ObjectBase(const void* address) {
  Dl_info info{};
  return dladdr(address, &info) ? info.dli_fbase : nullptr;
}

}  // namespace

// Not instrumented: a sanitizer's entry/exit hooks or pointer checks would turn the forwarding
// jump below into a call (CMakeLists.txt also compiles this file optimised in every build type).
extern "C" __attribute__((visibility("default"), no_sanitize("address", "undefined", "thread"))) void* dlsym(
    void* handle, const char* name) noexcept {
  // A sibling call (compiled to a jump), so glibc sees our caller's return address.
  if (handle == RTLD_NEXT || !MaybeIntercepted(name)) return gpuslice::shim::GlibcDlsym()(handle, name);
  void* found = gpuslice::shim::RealDlsym(handle, name);
  if (!found) return nullptr;
  // A library looking up its own function (the driver checking what it exports, as the
  // simulated driver's cuGetProcAddress does) must get exactly that function back.
  if (ObjectBase(found) == ObjectBase(__builtin_return_address(0))) return found;
  void* hook = gpuslice::shim::HookByName(name);
  return hook ? hook : found;
}
