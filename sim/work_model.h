// The simulator's work model: how long a spin_ns kernel occupies the SMs it is given.
//
// A spin_ns kernel's every thread spins for the kernel's argument. On a real GPU the block
// scheduler places as many blocks as fit on each SM (resident blocks per SM, limited here by the
// thread count: at most 32 blocks and 2048 threads per SM, as on Volta to Hopper), runs them,
// and places the next ones as those finish. So a kernel of B blocks on S SMs, k resident per SM,
// runs ceil(B / (S·k)) waves of its spin time. One block (today's narrow kernels) is one wave
// on any number of SMs; a kernel of S·k blocks fills the device in one wave and takes twice as
// long on half the SMs. Registers and shared memory, which also limit k on real hardware, are
// not modelled (docs/simulator.md, Work model).
#pragma once

#include <algorithm>
#include <cstdint>

namespace gpuslice::sim {

inline constexpr uint32_t kMaxResidentBlocksPerSm = 32;  // CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR
inline constexpr uint32_t kMaxThreadsPerSm = 2048;       // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR

// k: blocks of `threads_per_block` threads (1 to 1024) that fit on one SM at once.
inline uint32_t ResidentBlocksPerSm(uint32_t threads_per_block) {
  const uint32_t by_threads = kMaxThreadsPerSm / std::max<uint32_t>(threads_per_block, 1);
  return std::clamp<uint32_t>(by_threads, 1, kMaxResidentBlocksPerSm);
}

// ceil(B / (S·k)); at least one wave, and one wave when there are no SMs to count (S < 1).
inline uint64_t KernelWaves(uint64_t blocks, uint32_t threads_per_block, int sms) {
  if (blocks <= 1 || sms < 1) return 1;
  const uint64_t per_wave = static_cast<uint64_t>(sms) * ResidentBlocksPerSm(threads_per_block);
  return (blocks + per_wave - 1) / per_wave;
}

}  // namespace gpuslice::sim
