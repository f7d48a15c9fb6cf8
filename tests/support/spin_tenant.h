// A tenant for the simulator's MIG, MPS and work-model tests: keeps spin kernels running on the
// device its CUDA enumerates first.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "common/clock.h"
#include "tests/support/sim_driver_helpers.h"

namespace gpuslice::testing {

// In a child: device 0's primary context, then two spin kernels of `wave_ns` per context
// synchronisation until `run_ns` has passed. `wide`: the device's SMs x 32 single-thread blocks,
// one wave alone (work model); otherwise one block. Signals `fd` once the kernel is loaded.
// Returns 0, or 1-5 for the step that failed.
inline int SpinPairsUntil(bool wide, uint64_t wave_ns, uint64_t run_ns, int fd) {
  CUcontext ctx;
  CUmodule module;
  CUfunction spin;
  int sms = 0;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
  if (cuModuleLoadData(&module, kTestPtx) || cuModuleGetFunction(&spin, module, "spin_ns")) return 2;
  if (cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0)) return 3;
  const unsigned blocks = wide ? static_cast<unsigned>(sms) * 32 : 1;
  Signal(fd);
  const uint64_t end = MonotonicNanos() + run_ns;
  while (MonotonicNanos() < end) {
    void* params[] = {&wave_ns};
    if (cuLaunchKernel(spin, blocks, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr)) return 4;
    if (cuLaunchKernel(spin, blocks, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr)) return 4;
    if (cuCtxSynchronize()) return 5;
  }
  return 0;
}

}  // namespace gpuslice::testing
