// The GPUs `gpuslicectl plan` lays tenants out on: a model named on the command line (--model,
// with --gpus copies of it), or the node's GPUs read through NVML (--gpu). A GPU is MIG-capable
// when it is one of the models whose MIG profiles gpuslice knows (gpu/mig_profiles.h, NVIDIA's
// tables); any other GPU is planned as a whole GPU only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "gpu/mig_profiles.h"

namespace gpuslice::ctl {

struct PlanGpu {
  int index = 0;     // as NVML numbers it (--gpu), or 0, 1, ... for --model
  std::string name;  // "NVIDIA H200"
  std::string uuid;  // "GPU-..." when read from NVML, else ""
  uint64_t memory_bytes = 0;
  const gpu::MigGpuModel* model = nullptr;  // nullptr: not MIG-capable (as far as gpuslice knows)
};

// The model --model names: the simulator's names (GPUSLICE_SIM_MODEL: H200, H100-80GB, A100-80GB,
// A100-40GB), the driver's (NVIDIA H200), or the short forms (h200, h100-80, a100-40), in any
// case, with or without NVIDIA, spaces, dashes or underscores; a prefix of one name alone (H100)
// names it. An error of one line naming the value and every valid name, or the candidates of an
// ambiguous one (A100).
Result<const gpu::MigGpuModel*> FindPlanModel(const std::string& value);
// "A100-40GB, A100-80GB, H100-80GB or H200": the models whose MIG profiles gpuslice knows.
std::string PlanModelKeys();
// The same and the other names --model takes, for error lines.
std::string PlanModelChoices();

// `count` GPUs of `model`.
std::vector<PlanGpu> GpusOfModel(const gpu::MigGpuModel& model, int count);

// The GPUs of the given NVML indices, read through libnvidia-ml.so.1 (dlopen). An error of one
// line when NVML cannot be loaded or has no such GPU.
Result<std::vector<PlanGpu>> ReadNvmlGpus(const std::vector<int>& indices);

// The MIG model an NVML device name stands for ("NVIDIA H200" and "NVIDIA H200 (simulated)" are
// the H200), or nullptr.
const gpu::MigGpuModel* ModelOfDeviceName(const std::string& name);

}  // namespace gpuslice::ctl
