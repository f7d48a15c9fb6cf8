#include "ctl/plan_command.h"

#include <cstdio>

#include "common/exit_codes.h"
#include "common/quantity.h"
#include "ctl/plan_gpu.h"
#include "ctl/plan_input.h"
#include "ctl/plan_layout.h"
#include "ctl/plan_render.h"

namespace gpuslice::ctl {
namespace {

int Fail(int code, const std::string& line) {
  std::fprintf(stderr, "gpuslicectl plan: %s\n", line.c_str());
  return code;
}

bool ParseIndices(const std::string& text, std::vector<int>* indices) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const auto n = ParseUnsigned(std::string_view(text).substr(pos, comma - pos));
    if (!n || *n > 63) return false;
    indices->push_back(static_cast<int>(*n));
    pos = comma + 1;
  }
  return !indices->empty();
}

// The plan on the fewest GPUs of `model` that hold every tenant (1 to kMaxPlanGpus); when no count
// does, the error of the largest.
Result<Plan> PlanOnFewest(const gpu::MigGpuModel& model, const std::vector<PlanTenant>& tenants) {
  for (int count = 1;; ++count) {
    Result<Plan> plan = MakePlan(GpusOfModel(model, count), tenants);
    // Not a matter of how many GPUs (more memory or isolation than one of them gives): no count helps.
    if (plan.ok() || count == kMaxPlanGpus || plan.status().code() == Status::Code::kInvalidArgument) {
      if (plan.ok()) plan->fewest_gpus = true;
      return plan;
    }
  }
}

}  // namespace

int RunPlan(const PlanOptions& options) {
  if (options.model.empty() == options.gpu.empty())
    return Fail(kExitUsage, "give either --model (" + PlanModelChoices() + ") or --gpu N (read through NVML)");
  if (options.gpus != 0 && options.model.empty())
    return Fail(kExitUsage, "--gpus counts GPUs of --model; with --gpu, name them");
  std::vector<PlanGpu> gpus;
  const gpu::MigGpuModel* model = nullptr;
  if (!options.model.empty()) {
    const Result<const gpu::MigGpuModel*> found = FindPlanModel(options.model);
    if (!found.ok()) return Fail(kExitUsage, found.message());
    model = *found;
    if (options.gpus < 0 || options.gpus > kMaxPlanGpus)
      return Fail(kExitUsage, "--gpus must be 1 to " + std::to_string(kMaxPlanGpus) +
                                  " (or left out: the fewest that hold the tenants)");
    if (options.gpus > 0) gpus = GpusOfModel(*model, options.gpus);
  } else {
    std::vector<int> indices;
    if (!ParseIndices(options.gpu, &indices))
      return Fail(kExitUsage, "invalid --gpu '" + options.gpu + "'; expected NVML indices such as 0 or 0,1");
    Result<std::vector<PlanGpu>> read = ReadNvmlGpus(indices);
    if (!read.ok()) return Fail(kExitFailure, read.message());
    gpus = std::move(read).value();
  }
  Result<std::vector<PlanTenant>> read_tenants = ReadPlanTenants(options.tenants_file);
  if (!read_tenants.ok()) return Fail(kExitUsage, read_tenants.message());
  const std::vector<PlanTenant>& tenants = *read_tenants;
  const Result<Plan> plan_result = gpus.empty() ? PlanOnFewest(*model, tenants) : MakePlan(gpus, tenants);
  if (!plan_result.ok()) return Fail(kExitImpossible, plan_result.message());
  const Plan& plan = *plan_result;
  const std::string text = options.json ? RenderPlanJson(plan) : RenderPlanText(plan);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) return kExitFailure;
  return kExitOk;
}

}  // namespace gpuslice::ctl
