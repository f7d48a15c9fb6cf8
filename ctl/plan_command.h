// `gpuslicectl plan`: reads the tenants and the GPUs (a model, or the node's through NVML), lays
// the tenants out (plan_layout.h) and prints the plan (plan_render.h). It reads nothing of the
// broker and changes nothing: the setup commands it prints are for the operator to run.
#pragma once

#include <string>

namespace gpuslice::ctl {

inline constexpr int kMaxPlanGpus = 64;

struct PlanOptions {
  std::string tenants_file;  // YAML or JSON
  std::string model;         // --model (plan_gpu.h FindPlanModel); "" when --gpu is given
  int gpus = 0;              // --gpus: how many GPUs of --model; 0: the fewest that hold the tenants
  std::string gpu;           // --gpu: NVML indices, "0" or "0,1"
  bool json = false;
};

// Exit codes: 0 with a plan; kExitUsage for bad options or a bad tenants file; kExitFailure when
// NVML cannot be read; kExitImpossible when the request cannot be met (one line on stderr).
int RunPlan(const PlanOptions& options);

}  // namespace gpuslice::ctl
