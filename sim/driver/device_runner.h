// Runs this process's kernels on one simulated device: waits for the device (DeviceArbiter),
// occupies it for the kernel's duration in timeslice-sized chunks, and records the ground
// truth (busy time, kernel count) in the shared state.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "sim/device_arbiter.h"
#include "sim/sim_state.h"

namespace gpuslice::sim {

class DeviceRunner {
 public:
  // `mps_sm_cap` > 0: the unit runs an MPS server and this client may use that many SMs.
  DeviceRunner(SimState* state, int ordinal, int slot, int mps_sm_cap = 0);

  // A kernel was queued on some stream of this process for this device.
  void KernelQueued() { queued_.fetch_add(1); }
  // Runs one queued kernel to completion (called from the stream's worker thread): as many
  // waves of `wave_ns` as its grid needs on the SMs this process has (work_model.h).
  void RunKernel(uint64_t wave_ns, uint64_t blocks, uint32_t threads_per_block);
  // Gives the device back if this process holds it (process exit).
  void ReleaseDevice();

 private:
  // MPS: the kernel runs beside other clients' on the SMs it can get (at most the cap).
  void RunKernelMps(uint64_t wave_ns, uint64_t blocks, uint32_t threads_per_block);
  int AcquireMpsSms(int wanted);
  void ReleaseMpsSms(int sms);

  SimState* state_;
  SimDevice* device_;
  int slot_;
  int sms_;  // the SMs one of this process's kernels runs on
  int unit_;
  int mps_sm_cap_;  // 0: time-sliced device
  DeviceArbiter arbiter_;
  // Kernels of one context run one after another, as a spin kernel fills the whole device.
  std::mutex exec_mutex_;
  std::atomic<uint64_t> queued_{0};
};

// Sleeps until the monotonic deadline, finishing the last stretch without a timer so that
// short kernels are not stretched by timer slack.
void SleepUntilNanos(uint64_t deadline_ns);

}  // namespace gpuslice::sim
