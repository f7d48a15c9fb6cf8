// Time-slicing of one simulated device between processes, as the hardware does between contexts.
//
// One process at a time owns the device. The owner keeps it while it has work queued; when
// another process is waiting and the owner has run for a full timeslice, the owner hands the
// device to the next waiting process in slot order (round robin). There are no weights and no
// notion of tenants: this is the unmanaged baseline that gpuslice improves on.
//
// Crash safety: waiters sleep on a futex with a bounded timeout and, on waking, check that the
// owner is still alive; a dead owner's turn is taken back at once.
#pragma once

#include <cstdint>
#include <optional>

#include "sim/sim_state.h"

namespace gpuslice::sim {

class DeviceArbiter {
 public:
  DeviceArbiter(SimState* state, int ordinal, int slot);

  // Blocks until this process owns the device. Returns at once when it already does.
  void Acquire();
  // True when someone else waits and this process has used up its timeslice.
  bool ShouldYield() const;
  // Gives the device to the next waiting process (or leaves it idle), free since `free_since_ns`
  // on the device's timeline: the next owner's turn begins there, not when its thread wakes.
  void Release(uint64_t free_since_ns);
  // The time the current turn began (valid while owning): for a turn handed over, when the device
  // was given back, which a late host thread may make a moment in the past.
  uint64_t turn_started_ns() const;
  // Starts a new timeslice for the owner (used when nobody waited at the end of the last one).
  void RenewTurn();
  bool owns() const;

 private:
  // The live process after this one in slot order that waits for a turn; none when none does.
  std::optional<int> NextWaiter() const;
  // Gives the device to `next_slot`, or to no one, free since `free_since_ns`.
  void HandTo(std::optional<int> next_slot, uint64_t free_since_ns);

  SimState* state_;
  SimDevice* device_;
  int slot_;
};

}  // namespace gpuslice::sim
