#include "dra/device_survey.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace gpuslice::dra {

Result<DeviceSurvey> SurveyDevices(gpu::GpuInventory& inventory, const std::vector<NodeDevice>& published) {
  const Result<gpu::Discovery> discovered = inventory.Discover();
  if (!discovered.ok()) return Status::Error(fmt::format("gpuslice-dra-driver: {}", discovered.message()));
  DeviceSurvey survey;
  survey.devices = NameDevices(discovered->gpus);
  std::set<std::string> names;
  for (const auto& d : survey.devices) {
    names.insert(d.name);
    bool lost = false;
    if (std::string problem = inventory.Problem(d.gpu, &lost); !problem.empty())
      survey.problems[d.name] = {std::move(problem), lost};
  }
  std::set<int> unanswered;
  for (const auto& l : discovered->left_out) unanswered.insert(l.index);
  std::set<int> kept;
  for (const auto& d : published) {
    if (names.count(d.name) || !unanswered.count(d.gpu.index)) continue;
    bool lost = false;
    std::string problem = inventory.Problem(d.gpu, &lost);
    if (problem.empty()) continue;  // it answers, as something discovery did not list: gone
    survey.devices.push_back(d);
    survey.problems[d.name] = {std::move(problem), lost};
    kept.insert(d.gpu.index);
  }
  for (const auto& l : discovered->left_out) {
    if (!kept.count(l.index))
      survey.left_out_lines += fmt::format("gpuslice-dra-driver: GPU {} left out: {}\n", l.index, l.reason);
  }
  std::sort(survey.devices.begin(), survey.devices.end(), [](const NodeDevice& a, const NodeDevice& b) {
    return std::make_pair(a.gpu.index, a.gpu.mig_index) < std::make_pair(b.gpu.index, b.gpu.mig_index);
  });
  return survey;
}

std::vector<NodeDevice> DevicesForClaims(const DeviceSurvey& survey,
                                         const std::map<std::string, DeviceCondition>& conditions) {
  std::vector<NodeDevice> devices = survey.devices;
  for (auto& d : devices) {
    const auto c = conditions.find(d.name);
    d.problem = c != conditions.end() && !c->second.healthy ? c->second.message : "";
  }
  return devices;
}

}  // namespace gpuslice::dra
