// Runs this process's kernels on one simulated device: waits for the device (DeviceArbiter),
// places each kernel on the device's timeline in timeslice-sized chunks, and records the ground
// truth (busy time, kernel count) in the shared state.
//
// The timeline is arithmetic: while this process holds the device, a kernel starts where the
// previous one ended (`free_at_ns_`), so a stream's worker schedules queued kernels ahead of real
// time instead of waiting each one out on a host core; a short kernel would otherwise be spun in
// full, and two tenants' spinning workers would measure the host's CPUs, not the device. The
// look-ahead never passes the end of the current turn, so the hand-over between processes is
// decided in real time, and the device is given back only once real time reaches the timeline
// (no kernel of another process ever overlaps one of this process).
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
  // Schedules one queued kernel (called from the stream's worker thread): as many waves of
  // `wave_ns` as its grid needs on the SMs this process has (work_model.h), starting no earlier
  // than `not_before_ns` (when it was queued, and its stream's previous work). Returns the time it ends,
  // which may lie up to one timeslice ahead; the caller treats the kernel as complete from then.
  // Under MPS the kernel is waited out and the current time returned.
  uint64_t RunKernel(uint64_t wave_ns, uint64_t blocks, uint32_t threads_per_block, uint64_t not_before_ns);
  // The stream whose kernel ends at `end_ns` has nothing more for the device now. Unless another
  // kernel of this process was scheduled after that one (its stream then does this when it
  // ends), waits until the device gets there and gives it back if no kernel is queued or the
  // turn is over while another process waits.
  void ReleaseIfIdle(uint64_t end_ns);
  // Gives the device back if this process holds it, once its scheduled work is done (process exit).
  void ReleaseDevice();

 private:
  // MPS: the kernel runs beside other clients' on the SMs it can get (at most the cap).
  uint64_t RunKernelMps(uint64_t wave_ns, uint64_t blocks, uint32_t threads_per_block);
  int AcquireMpsSms(int wanted);
  void ReleaseMpsSms(int sms);
  struct Window {
    uint64_t start;     // where the next kernel chunk starts on the timeline
    uint64_t turn_end;  // the end of the turn it starts in: chunks never pass it
  };
  // Holds the device and finds where the next chunk starts; at the end of a turn, waits for the
  // device to get there and then yields to a waiting process or renews the turn.
  Window NextWindow(uint64_t not_before_ns);
  // Gives the device back, free on the timeline since `free_since_ns`; the caller has waited
  // until then.
  void ReleaseHeld(uint64_t free_since_ns);

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
  // Guarded by exec_mutex_. `held_`: the device has been this process's since `free_at_ns_`
  // was set, so the next kernel may start there; a release or a preemption ends that.
  uint64_t free_at_ns_ = 0;
  bool held_ = false;
};

// The last stretch before a deadline that SleepUntilNanos spins rather than sleeps: a timer wakes
// ~50 us late on a VM.
inline constexpr uint64_t kSpinTailNs = 60'000;

// Sleeps until the monotonic deadline, finishing the last stretch without a timer so that the
// device is not handed over late, nor a synchronisation returned late, by timer slack.
void SleepUntilNanos(uint64_t deadline_ns);

}  // namespace gpuslice::sim
