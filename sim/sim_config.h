// The simulated devices' description, read from GPUSLICE_SIM_* variables by the process that
// creates the shared state (docs/simulator.md lists them). Later processes see the devices as
// created, the way every process sees the same hardware.
#pragma once

#include <string>

#include "sim/sim_state_layout.h"

namespace gpuslice::sim {

struct SimConfig {
  int device_count = 1;
  SimDeviceConfig devices[kMaxDevices] = {};
  uint64_t default_kernel_ns = 0;  // duration of kernels other than spin_ns (per process)
  // MIG (GPUSLICE_SIM_MIG): the same layout on every device.
  uint32_t mig_instance_count = 0;
  uint32_t mig_enabled_gpus = 0;
  SimMigInstance mig_instances[kMaxMigInstances] = {};
  SimDeviceConfig mig_units[kMaxMigInstances] = {};
  // MPS (GPUSLICE_SIM_MPS=1): an MPS server on every device.
  uint32_t mps_enabled_gpus = 0;
  // The driver's branch (GPUSLICE_SIM_DRIVER_VERSION): from kPartitioningDriverBranch on, NVML
  // sets per-cgroup memory limits and the driver enforces them (sim/memory_partitioning.h).
  uint32_t driver_branch = 580;
};

// Reads the GPUSLICE_SIM_* variables. On a bad value returns false and sets *error to one line
// naming the variable, the value and a valid example.
bool LoadSimConfigFromEnv(SimConfig* config, std::string* error);

// The state file: GPUSLICE_SIM_STATE, or /dev/shm/gpuslice-sim.
std::string SimStatePath();

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints UUIDs.
std::string FormatGpuUuid(const uint8_t (&uuid)[16]);
// "MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", the UUID of a MIG instance.
std::string FormatMigUuid(const uint8_t (&uuid)[16]);

}  // namespace gpuslice::sim
