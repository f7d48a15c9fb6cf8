#include "device_runner.h"

#include <time.h>

#include <algorithm>

#include "common/clock.h"
#include "common/futex.h"
#include "sim/kernel_log.h"
#include "sim/work_model.h"

namespace gpuslice::sim {

// The last stretch is spun rather than slept (kSpinTailNs): spinning without sched_yield,
// because a yield on a loaded CPU can give the core away for a whole scheduler slice.
void SleepUntilNanos(uint64_t deadline_ns) {
  uint64_t now = MonotonicNanos();
  if (deadline_ns > now + kSpinTailNs) {
    const uint64_t wake = deadline_ns - kSpinTailNs;
    timespec ts{static_cast<time_t>(wake / 1'000'000'000ULL), static_cast<long>(wake % 1'000'000'000ULL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) != 0) {
    }
  }
  while (MonotonicNanos() < deadline_ns) {
  }
}

DeviceRunner::DeviceRunner(SimState* state, int ordinal, int slot, int mps_sm_cap)
    : state_(state),
      device_(&state->device(ordinal)),
      slot_(slot),
      sms_(device_->config.sm_count),
      unit_(ordinal),
      mps_sm_cap_(mps_sm_cap),
      arbiter_(state, ordinal, slot) {}

uint64_t DeviceRunner::RunKernel(uint64_t wave_ns, uint64_t blocks, uint32_t threads_per_block,
                                 uint64_t not_before_ns) {
  if (mps_sm_cap_ > 0) return RunKernelMps(wave_ns, blocks, threads_per_block);
  const uint64_t waves = KernelWaves(blocks, threads_per_block, sms_);
  const uint64_t duration_ns = waves > UINT64_MAX / std::max<uint64_t>(wave_ns, 1) ? UINT64_MAX : wave_ns * waves;
  std::lock_guard<std::mutex> lock(exec_mutex_);
  SimProcessDeviceStats& stats = device_->processes[slot_];
  // A kernel of no length (a `noop` by default) still ends after what precedes it on the device
  // and in its stream, and while the device is held it moves the timeline there, so that its
  // stream's ReleaseIfIdle recognises it as the last kernel placed.
  uint64_t end = not_before_ns;
  if (held_) end = free_at_ns_ = std::max(end, free_at_ns_);
  uint64_t remaining = duration_ns;
  const uint64_t logged_kernel = NextLoggedKernel();
  while (remaining > 0) {
    const Window window = NextWindow(not_before_ns);
    const uint64_t chunk = std::min(remaining, window.turn_end - window.start);
    end = free_at_ns_ = window.start + chunk;
    LogKernelStretch(unit_, logged_kernel, window.start, end);
    // Counted when scheduled: the device will do it, as the turn that holds it cannot be taken
    // before it ends (a stopped process is preempted only two timeslices into its turn).
    stats.busy_ns.fetch_add(chunk);
    device_->busy_ns.fetch_add(chunk);
    remaining -= chunk;
  }
  stats.kernels.fetch_add(1);
  queued_.fetch_sub(1);
  return end;
}

DeviceRunner::Window DeviceRunner::NextWindow(uint64_t not_before_ns) {
  const uint64_t timeslice = device_->config.timeslice_ns;
  while (true) {
    // Preempted (stopped past its turn) or released: the device is new to this process, and its
    // timeline starts now.
    if (!held_ || !arbiter_.owns()) {
      arbiter_.Acquire();
      held_ = true;
      free_at_ns_ = arbiter_.turn_started_ns();
    }
    // Not the current time: a worker that got here late (its thread waited for a CPU) must not
    // leave the device idle while it held it with work queued.
    const uint64_t start = std::max(free_at_ns_, not_before_ns);
    const uint64_t turn_end = arbiter_.turn_started_ns() + timeslice;
    if (start < turn_end) return {start, turn_end};
    // The timeline has reached the end of the turn: whether it passes to a waiting process is
    // decided when the device really gets there.
    SleepUntilNanos(start);
    if (!arbiter_.owns()) continue;  // preempted meanwhile
    if (arbiter_.ShouldYield()) {
      ReleaseHeld(start);
      continue;
    }
    arbiter_.RenewTurn();  // nobody waits: the turn simply goes on
  }
}

void DeviceRunner::ReleaseHeld(uint64_t free_since_ns) {
  held_ = false;
  arbiter_.Release(free_since_ns);
}

void DeviceRunner::ReleaseIfIdle(uint64_t end_ns) {
  if (mps_sm_cap_ > 0) return;
  std::lock_guard<std::mutex> lock(exec_mutex_);
  if (!held_ || free_at_ns_ != end_ns) return;
  SleepUntilNanos(free_at_ns_);
  // A context with nothing left to run yields the device, as the hardware scheduler does, once
  // its last kernel has finished; so does one whose turn is over while another process waits.
  if (queued_.load() != 0 && !arbiter_.ShouldYield()) return;
  ReleaseHeld(free_at_ns_);
}

void DeviceRunner::ReleaseDevice() {
  std::lock_guard<std::mutex> lock(exec_mutex_);
  if (held_) SleepUntilNanos(free_at_ns_);
  ReleaseHeld(held_ ? free_at_ns_ : MonotonicNanos());
}

// MPS: no time-slicing between clients. The kernel takes as many SMs as its grid can use, up to
// the client's cap, holds them for its waves and gives them back; while fewer are free it waits. Busy time is counted
// in SM-time (duration x SMs held / device SMs), so that a process's busy fraction is its share of the SMs.
uint64_t DeviceRunner::RunKernelMps(uint64_t wave_ns, uint64_t blocks, uint32_t threads_per_block) {
  std::lock_guard<std::mutex> lock(exec_mutex_);
  SimProcessDeviceStats& stats = device_->processes[slot_];
  const uint64_t per_sm = ResidentBlocksPerSm(threads_per_block);
  const int wanted =
      static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(mps_sm_cap_), (blocks + per_sm - 1) / per_sm));
  const int sms = AcquireMpsSms(std::clamp(wanted, 1, mps_sm_cap_));
  const uint64_t waves = KernelWaves(blocks, threads_per_block, sms);
  const uint64_t duration_ns = waves > UINT64_MAX / std::max<uint64_t>(wave_ns, 1) ? UINT64_MAX : wave_ns * waves;
  const uint64_t start = MonotonicNanos();
  SleepUntilNanos(start + duration_ns);
  const uint64_t ran = MonotonicNanos() - start;
  LogKernelStretch(unit_, NextLoggedKernel(), start, start + ran);
  ReleaseMpsSms(sms);
  const uint64_t sm_time = static_cast<uint64_t>(static_cast<double>(ran) * sms / std::max(sms_, 1));
  stats.busy_ns.fetch_add(sm_time);
  device_->busy_ns.fetch_add(sm_time);
  stats.kernels.fetch_add(1);
  queued_.fetch_sub(1);
  return MonotonicNanos();
}

int DeviceRunner::AcquireMpsSms(int wanted) {
  SimMpsDevice& mps = state_->segment().mps.devices[unit_];
  while (true) {
    const uint32_t seen = mps.sequence.load();
    int32_t free = mps.sms_free.load();
    while (free >= wanted) {
      if (mps.sms_free.compare_exchange_weak(free, free - wanted)) {
        mps.sms_held[slot_].fetch_add(static_cast<uint32_t>(wanted));
        return wanted;
      }
    }
    // Too few SMs free: wait for other clients' kernels to give some back (a kernel never starts
    // on fewer SMs than its grid and cap allow, see docs/simulator.md). A holder that died has
    // its SMs returned by the reaper (SimState::ReleaseSlotLocked).
    if (!FutexWait(&mps.sequence, seen, 5'000'000)) state_->ReapDeadProcesses();
  }
}

void DeviceRunner::ReleaseMpsSms(int sms) {
  SimMpsDevice& mps = state_->segment().mps.devices[unit_];
  mps.sms_held[slot_].fetch_sub(static_cast<uint32_t>(sms));
  mps.sms_free.fetch_add(sms);
  mps.sequence.fetch_add(1);
  FutexWakeAll(&mps.sequence);
}

}  // namespace gpuslice::sim
