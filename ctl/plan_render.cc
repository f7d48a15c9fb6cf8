#include "ctl/plan_render.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "ctl/units.h"

namespace gpuslice::ctl {
namespace {

std::string UuidOrPlaceholder(const PlannedGpu& g) { return g.gpu.uuid.empty() ? "<its GPU-UUID>" : g.gpu.uuid; }

std::string InstanceList(const PlannedGpu& g) {
  std::string list;
  for (const auto& u : g.units) list += (list.empty() ? "" : ",") + std::string(u.profile->name);
  return list;
}

std::string EnvLine(const PlannedTenant& t) {
  std::string line;
  for (const auto& [name, value] : t.env) line += (line.empty() ? "" : " ") + name + "=" + value;
  return line;
}

std::string KubernetesLine(const PlannedTenant& t) {
  std::string line;
  for (const auto& [name, count] : t.kubernetes)
    line += (line.empty() ? "" : ", ") + name + ": " + std::to_string(count);
  return line;
}

std::string Percent1(double value) { return fmt::format("{:.1f}%", value); }

}  // namespace

std::vector<std::string> SetupCommands(const PlannedGpu& g) {
  const std::string i = std::to_string(g.gpu.index);
  switch (g.mode) {
    case GpuMode::kMig:
      return {"nvidia-smi -i " + i + " -mig 1", "nvidia-smi mig -i " + i + " -cgi " + InstanceList(g) + " -C",
              "simulated: GPUSLICE_SIM_MODEL=" + std::string(g.gpu.model->key) + " GPUSLICE_SIM_MIG=" + g.mig_layout};
    case GpuMode::kMps:
      return {"nvidia-cuda-mps-control -d   # as root, on the node",
              "gpuslicectl set --gpu " + UuidOrPlaceholder(g) + " --mode mps"};
    case GpuMode::kTimeslice:
      return {"gpuslicectl set --gpu " + UuidOrPlaceholder(g) + " --mode timeslice   # the default"};
  }
  return {};
}

std::string RenderPlanText(const Plan& plan) {
  std::string out = fmt::format("Plan: {} tenant{} on {} GPU{}", plan.tenants.size(),
                                plan.tenants.size() == 1 ? "" : "s", plan.gpus.size(),
                                plan.gpus.size() == 1 ? "" : "s");
  if (!plan.unused_gpus.empty()) out += fmt::format(" ({} more given, unused)", plan.unused_gpus.size());
  if (plan.fewest_gpus) out += ": the fewest that hold them (--gpus N plans for N)";
  out += "\n";
  for (size_t gi = 0; gi < plan.gpus.size(); ++gi) {
    const PlannedGpu& g = plan.gpus[gi];
    out += fmt::format("\nGPU {}: {}, {}, tier {}: ", g.gpu.index, g.gpu.name, FormatBytes(g.gpu.memory_bytes), g.tier);
    out += g.mode == GpuMode::kMig   ? "MIG " + g.mig_layout
           : g.mode == GpuMode::kMps ? std::string("whole GPU, MPS (gpuslice mode mps)")
                                     : std::string("whole GPU, time-sliced by gpuslice");
    out += "\n";
    for (const auto& command : SetupCommands(g)) out += "  set up: " + command + "\n";
    for (const PlannedUnit& u : g.units) {
      if (!u.profile)
        out += g.mode == GpuMode::kMps ? "  the whole GPU, its SMs shared by MPS clients:\n"
                                       : "  the whole GPU, its time shared by soft slices:\n";
      if (u.profile)
        out += fmt::format("  instance {} at memory slice {}: {} SMs ({} of the GPU), {}, {}\n", u.profile->name,
                           u.start, u.profile->sm_count, Percent1(u.sm_percent), FormatBytes(u.memory_bytes),
                           u.shared ? "shared by soft slices (CUDA_VISIBLE_DEVICES=<its MIG-UUID>)"
                                    : "its tenant's alone (CUDA_VISIBLE_DEVICES=<its MIG-UUID>)");
      for (size_t t : u.tenants) {
        const PlannedTenant& pt = plan.tenants[t];
        out += fmt::format("    {}: {}{}\n", pt.tenant.name, PlacementName(pt.placement),
                           pt.env.empty() ? "" : "  " + EnvLine(pt));
        out += "      why: " + pt.reason + "\n";
        out += "      kubernetes: " + KubernetesLine(pt) + " (" + pt.kubernetes_note + ")\n";
      }
      out += fmt::format("    unused: {} of memory", FormatBytes(u.memory_unused));
      if (u.shared && g.mode == GpuMode::kMps)
        out += fmt::format(", {}% of the SMs within no client's cap", u.compute_unused_percent);
      else if (u.shared)
        out += fmt::format(", {}% of the {}'s time promised to no tenant (lent to whoever wants it)",
                           u.compute_unused_percent, u.profile ? "instance" : "GPU");
      else
        out +=
            fmt::format(", about {}% of the instance's SMs beyond its tenant's share (stranded: MIG cannot lend them)",
                        u.compute_unused_percent);
      out += "\n";
    }
    if (g.mode == GpuMode::kMig)
      out += fmt::format("  outside the instances: {} compute slice{}, {} memory slice{} ({}), {} SMs\n",
                         g.free_compute_slices, g.free_compute_slices == 1 ? "" : "s", g.free_memory_slices,
                         g.free_memory_slices == 1 ? "" : "s", FormatBytes(g.memory_outside_instances),
                         g.sms_outside_instances);
  }
  for (const auto& gpu : plan.unused_gpus) out += fmt::format("\nGPU {}: {}: unused\n", gpu.index, gpu.name);
  return out;
}

std::string RenderPlanJson(const Plan& plan) {
  using Json = nlohmann::ordered_json;
  Json gpus = Json::array();
  for (const PlannedGpu& g : plan.gpus) {
    Json units = Json::array();
    for (const PlannedUnit& u : g.units) {
      Json names = Json::array();
      for (size_t t : u.tenants) names.push_back(plan.tenants[t].tenant.name);
      units.push_back({{"profile", u.profile ? Json(u.profile->name) : Json(nullptr)},
                       {"start", u.profile ? Json(u.start) : Json(nullptr)},
                       {"memory_bytes", u.memory_bytes},
                       {"sm_percent", u.sm_percent},
                       {"shared", u.shared},
                       {"tenants", names},
                       {"memory_unused_bytes", u.memory_unused},
                       {"compute_unused_percent", u.compute_unused_percent}});
    }
    Json gpu = {{"index", g.gpu.index},
                {"name", g.gpu.name},
                {"uuid", g.gpu.uuid.empty() ? Json(nullptr) : Json(g.gpu.uuid)},
                {"model", g.gpu.model ? Json(g.gpu.model->key) : Json(nullptr)},
                {"memory_bytes", g.gpu.memory_bytes},
                {"tier", g.tier},
                {"mode", GpuModeName(g.mode)},
                {"mig_layout", g.mode == GpuMode::kMig ? Json(g.mig_layout) : Json(nullptr)},
                {"setup", SetupCommands(g)},
                {"units", units}};
    if (g.mode == GpuMode::kMig)
      gpu["outside_instances"] = {{"compute_slices", g.free_compute_slices},
                                  {"memory_slices", g.free_memory_slices},
                                  {"memory_bytes", g.memory_outside_instances},
                                  {"sms", g.sms_outside_instances}};
    gpus.push_back(std::move(gpu));
  }
  Json tenants = Json::array();
  for (const PlannedTenant& pt : plan.tenants) {
    Json env = Json::object();
    for (const auto& [name, value] : pt.env) env[name] = value;
    Json resources = Json::object();
    for (const auto& [name, count] : pt.kubernetes) resources[name] = count;
    tenants.push_back({{"name", pt.tenant.name},
                       {"tier", pt.tenant.tier},
                       {"placement", PlacementName(pt.placement)},
                       {"gpu", pt.gpu},
                       {"unit", pt.unit},
                       {"compute_request_percent", pt.compute_request_percent},
                       {"env", env},
                       {"reason", pt.reason},
                       {"kubernetes", {{"resources", resources}, {"note", pt.kubernetes_note}}}});
  }
  Json unused = Json::array();
  for (const auto& gpu : plan.unused_gpus) unused.push_back(gpu.index);
  Json root = {{"gpus", gpus}, {"tenants", tenants}, {"unused_gpus", unused}, {"fewest_gpus", plan.fewest_gpus}};
  return root.dump(2) + "\n";
}

}  // namespace gpuslice::ctl
