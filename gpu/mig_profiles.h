// NVIDIA's MIG GPU-instance profiles for the GPU models gpuslice knows (the ones the simulator
// can play, docs/simulator.md, MIG; gpuslicectl plan and gpuslice-place lay instances out with
// them): names, compute and memory slices, SMs, how many fit, and where each may be placed.
// Facts about NVIDIA's GPUs, in the product: the simulator uses them, never the other way.
//
// A MIG GPU has 7 compute slices and 8 memory slices. A GPU instance of profile P occupies
// P.memory_slices consecutive memory slices from its placement start, and its start must be one
// P allows (nvidia-smi mig -lgipp): 1g at 0-6, the 2-memory-slice 1g at 0/2/4/6, 2g at 0/2/4,
// 3g at 0/4, 4g and 7g at 0. Instances may not overlap, and no profile may be used more often
// than its count (a single +me instance per GPU). A layout is valid exactly when such a placement
// exists (ValidateMigLayout).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace gpuslice::gpu {

inline constexpr int kMigMemorySlices = 8;
inline constexpr int kMigComputeSlices = 7;

struct MigProfile {
  const char* name;    // "3g.71gb"
  int nvml_profile;    // NVML_GPU_INSTANCE_PROFILE_* (nvmlDeviceGetGpuInstanceProfileInfo)
  int lgip_id;         // the ID column of `nvidia-smi mig -lgip` (19, 20, 15, 14, 9, 5, 0)
  int compute_slices;  // the "g"
  int memory_slices;   // of kMigMemorySlices
  int sm_count;        // SMs of an instance (nvidia-smi mig -lgip)
  int max_count;       // instances of this profile that fit on one GPU
  uint8_t starts;      // bit s set: the instance may start at memory slice s
};

struct MigGpuModel {
  const char* key;        // GPUSLICE_SIM_MODEL value: A100-40GB, A100-80GB, H100-80GB, H200
  const char* name;       // device name as the driver reports it
  uint64_t memory_bytes;  // total device memory
  int sm_count;           // SMs of the whole GPU with MIG disabled
  std::vector<MigProfile> profiles;
};

// The four models, in the order above.
const std::vector<MigGpuModel>& MigGpuModels();
const MigGpuModel* FindMigGpuModel(std::string_view key);
const MigProfile* FindMigProfile(const MigGpuModel& model, std::string_view name);

// One GPU instance of a layout, placed.
struct MigPlacement {
  const MigProfile* profile;
  int start;  // first memory slice
};

// Parses "3g.71gb,2g.35gb,1g.18gb" (optionally "1g.18gb@6" to pin a start) for `model` and
// places every instance. Order of the result: as given. An InvalidArgument error with one line
// naming what is wrong and what would be valid.
Result<std::vector<MigPlacement>> ValidateMigLayout(const MigGpuModel& model, std::string_view layout);

// "1g.18gb(x7 at 0-6) ..." for error messages.
std::string DescribeMigProfiles(const MigGpuModel& model);

}  // namespace gpuslice::gpu
