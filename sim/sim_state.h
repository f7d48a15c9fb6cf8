// Attaching to the simulated GPUs' shared state, process registration, liveness and the
// device-wide memory ledger. Used by the simulated libcuda, the simulated NVML and the query API.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sim/sim_state_layout.h"

namespace gpuslice::sim {

class SimState {
 public:
  // Maps the state file at SimStatePath(), creating it from GPUSLICE_SIM_* when absent.
  // Returns nullptr and one line in *error for a bad variable or an incompatible file.
  static std::unique_ptr<SimState> OpenOrCreate(std::string* error);
  // Maps an existing state file without creating it (for queries).
  static std::unique_ptr<SimState> OpenExisting(const std::string& path, std::string* error);

  ~SimState();
  SimState(const SimState&) = delete;
  SimState& operator=(const SimState&) = delete;

  SimSegment& segment() { return *segment_; }
  const std::string& path() const { return path_; }
  int device_count() const { return static_cast<int>(segment_->device_count); }
  // A whole device (unit < kMaxDevices) or a MIG instance (kMaxDevices + instance index): each
  // has its own configuration, memory ledger, arbiter and ground truth.
  SimDevice& device(int unit) {
    return unit < kMaxDevices ? segment_->devices[unit] : segment_->mig.units[unit - kMaxDevices];
  }
  int mig_instance_count() const { return static_cast<int>(segment_->mig.instance_count); }
  bool mig_enabled(int gpu) const { return (segment_->mig.enabled_gpus >> gpu) & 1u; }
  // An MPS server runs on the unit (whole devices only).
  bool mps_enabled(int unit) const { return unit < kMaxDevices && ((segment_->mps.enabled_gpus >> unit) & 1u); }

  // Claims a process slot and holds its liveness lock until UnregisterProcess or death.
  // Returns the slot; none when every slot belongs to a live process.
  std::optional<int> RegisterProcess();
  // Orderly exit: returns the process's device memory and marks the slot exited.
  void UnregisterProcess(int slot);

  // True while the slot's process holds its liveness lock (works across PID namespaces).
  bool IsAlive(int slot);
  // The slot belongs to a process that has not unregistered (a lock-free look at its state).
  bool IsLiveSlot(int slot) const;
  // Returns the memory of every process that died and marks its slot exited.
  void ReapDeadProcesses();

  // Memory is per unit (a device, or a MIG instance: its own slice of the device's memory).
  // Atomically checks the unit's capacity and charges `bytes` to the slot. False: out of memory.
  // `own_limit` (0: none) caps what the slot itself may hold there (an MPS client's pinned limit).
  bool ChargeMemory(int ordinal, int slot, uint64_t bytes, uint64_t own_limit = 0);
  void CreditMemory(int ordinal, int slot, uint64_t bytes);
  // Bytes held on the device by live processes (dead ones are reaped first).
  uint64_t MemoryUsed(int ordinal);

  // After fork(): the child must not keep the parent's liveness locks alive.
  void CloseInheritedDescriptor();

 private:
  SimState(std::string path, int fd, SimSegment* segment);
  uint64_t SumMemoryLocked(int unit);
  void ReapLocked();
  void ReleaseSlotLocked(int slot);

  std::string path_;
  int fd_;
  SimSegment* segment_;
  int own_slot_ = -1;
};

}  // namespace gpuslice::sim
