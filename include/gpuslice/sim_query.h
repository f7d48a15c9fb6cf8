// Read-only view of the simulated GPUs: the ground truth (per-process device busy time, kernel
// counts and memory) that tests and benchmarks measure shares against. Also available as the
// `gpuslice-sim` command.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuslice::simquery {

struct ProcessUsage {
  int slot = -1;
  int pid = 0;        // as the process saw itself (may be another PID namespace's)
  bool live = false;  // false: the process exited; its figures are final
  std::string command;
  uint64_t memory_used = 0;  // device bytes it holds (0 once exited)
  uint64_t busy_ns = 0;      // device time its kernels occupied
  uint64_t kernels = 0;      // kernels it completed
  uint64_t started_ns = 0;   // CLOCK_MONOTONIC
  uint64_t ended_ns = 0;
};

struct DeviceSnapshot {
  int ordinal = 0;
  std::string name;
  std::string uuid;  // "GPU-..."
  uint64_t total_memory = 0;
  uint64_t used_memory = 0;
  uint64_t busy_ns = 0;    // time some kernel occupied the device
  uint64_t handovers = 0;  // context switches between processes
  uint64_t timeslice_ns = 0;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int running_slot = -1;                // process slot currently on the device, -1 when idle
  std::vector<ProcessUsage> processes;  // every slot that is live or has exited
  // MIG: on a device in MIG mode, its instances (each with its own figures, `ordinal` the
  // instance's index in the state, `uuid` "MIG-..."); the device's used memory and busy time
  // are then the instances' sums.
  bool mig_enabled = false;
  std::string mig_profile;   // on an instance: "3g.71gb"
  int mig_start = -1;        // on an instance: first memory slice
  int gpu_instance_id = -1;  // on an instance
  std::vector<DeviceSnapshot> mig_instances;
};

struct Snapshot {
  uint64_t taken_ns = 0;  // CLOCK_MONOTONIC
  std::string state_path;
  std::vector<DeviceSnapshot> devices;
};

// The state file the simulated driver uses: $GPUSLICE_SIM_STATE or /dev/shm/gpuslice-sim.
std::string StatePath();

// Reads the simulated devices at `path`; dead processes are reaped (their memory returned)
// first. False with one line in *error when the file is missing or incompatible.
bool TakeSnapshot(const std::string& path, Snapshot* out, std::string* error);

// Removes the state file so the next process creates the devices anew from GPUSLICE_SIM_*.
// Refused (false, *error) while a live process uses it.
bool ResetState(const std::string& path, std::string* error);

// Marks device `ordinal` lost (fallen off the bus) or present again: the simulated NVML answers
// NVML_ERROR_GPU_IS_LOST for a lost device's queries (health checks of device plugins).
bool SetDeviceLost(const std::string& path, int ordinal, bool lost, std::string* error);

}  // namespace gpuslice::simquery
