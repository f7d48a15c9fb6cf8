// Which process's kernel had the simulated device when (docs/simulator.md, "The kernel log"):
// while GPUSLICE_SIM_KERNEL_LOG names a file, every process appends one
// JSON line per stretch of device time one of its kernels ran —
// {"pid":N,"device":D,"kernel":K,"start_ns":S,"end_ns":E}, CLOCK_MONOTONIC, K counting the
// process's kernels from 1. A kernel the hardware's time-slicing splits between turns is several
// stretches of one K; under MPS each kernel is one stretch, and clients' stretches overlap.
//
// What it is for: the idle time between two processes' kernels, and whose kernel follows whose,
// are what a sharing layer's hand-overs cost, and no busy fraction shows them
// (scripts/sim-kernel-log.py sums them up).
#pragma once

#include <cstdint>

namespace gpuslice::sim {

// One stretch of device `ordinal`'s time given to this process's kernel number `kernel` (a
// number from NextLoggedKernel). Nothing when the variable is unset; one write() per stretch
// (O_APPEND, so the processes' lines do not interleave).
void LogKernelStretch(int ordinal, uint64_t kernel, uint64_t start_ns, uint64_t end_ns);
// This process's next kernel number; 0 while the variable is unset.
uint64_t NextLoggedKernel();

}  // namespace gpuslice::sim
