// The calling thread's current context, known without asking the driver at every launch.
//
// A launch is gated on the GPU of its context, so the shim must know the current context at every
// launch. Asking the driver (cuCtxGetCurrent) costs a call per launch; instead the shim mirrors
// it per thread: every way of changing a thread's current context goes through an intercepted
// entry point (cuCtxSetCurrent, cuCtxPushCurrent, cuCtxPopCurrent, cuCtxCreate; the CUDA runtime
// reaches them through cuGetProcAddress, which hands out the hooks), and each records what it
// made current — or, where the driver chooses (a pop, a destroyed context), that the mirror is
// unknown, so that the next launch asks once. A thread's first launch asks once too. Destroying
// a context makes every thread's mirror unknown (another thread may have had it current).
#pragma once

#include <atomic>
#include <cstdint>

#include "shim/driver_api.h"
#include "shim/real_driver.h"

namespace gpuslice::shim {

class CurrentContext {
 public:
  // The calling thread's current context (nullptr: none), asking the driver only when the
  // mirror is unknown.
  static CUcontext Get(const RealDriver* real) {
    const Mirror& m = mirror_;
    // sabotage-point: context-asked-per-launch
    if (m.epoch == epoch_.load(std::memory_order_acquire) && m.epoch != 0) return m.context;
    return Ask(real);
  }
  // The calling thread made `context` current (nullptr: none).
  static void Set(CUcontext context) { mirror_ = Mirror{context, epoch_.load(std::memory_order_acquire)}; }
  // The calling thread's current context changed to one the driver chose.
  static void Unknown() { mirror_.epoch = 0; }
  // A context was destroyed: every thread asks again.
  static void ForgetEverywhere() { epoch_.fetch_add(1, std::memory_order_acq_rel); }

 private:
  static CUcontext Ask(const RealDriver* real);

  struct Mirror {
    CUcontext context;
    uint64_t epoch;  // 0: unknown; else valid while it equals epoch_
  };
  __attribute__((tls_model("initial-exec"))) static inline thread_local Mirror mirror_{nullptr, 0};
  static inline std::atomic<uint64_t> epoch_{1};
};

}  // namespace gpuslice::shim
