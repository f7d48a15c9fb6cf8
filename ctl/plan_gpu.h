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

// The --model values: h200, h100-80, a100-80, a100-40 (or the table's own keys, any case).
// nullptr when unknown.
const gpu::MigGpuModel* FindPlanModel(const std::string& value);
// "h200, h100-80, a100-80 or a100-40", for error lines and --help.
const char* PlanModelChoices();

// `count` GPUs of `model`.
std::vector<PlanGpu> GpusOfModel(const gpu::MigGpuModel& model, int count);

// The GPUs of the given NVML indices, read through libnvidia-ml.so.1 (dlopen). An error of one
// line when NVML cannot be loaded or has no such GPU.
Result<std::vector<PlanGpu>> ReadNvmlGpus(const std::vector<int>& indices);

// The MIG model an NVML device name stands for ("NVIDIA H200" and "NVIDIA H200 (simulated)" are
// the H200), or nullptr.
const gpu::MigGpuModel* ModelOfDeviceName(const std::string& name);

}  // namespace gpuslice::ctl
