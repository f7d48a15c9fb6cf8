// `gpuslicectl plan`'s output: the plan as text for operators and as one JSON object (--json)
// for tools. Both carry the same facts; the JSON's keys are listed in docs/choosing.md.
#pragma once

#include <string>
#include <vector>

#include "ctl/plan_layout.h"

namespace gpuslice::ctl {

// How each GPU of the plan is set up (nvidia-smi for MIG, gpuslicectl set, the MPS daemon).
std::vector<std::string> SetupCommands(const PlannedGpu& gpu);

std::string RenderPlanText(const Plan& plan);
std::string RenderPlanJson(const Plan& plan);

}  // namespace gpuslice::ctl
