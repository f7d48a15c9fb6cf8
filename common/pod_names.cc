#include "common/pod_names.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/printable.h"

namespace gpuslice {

std::string PodName::Text() const { return Printable(namespace_name + "/" + pod + "/" + container); }

PodNames ReadPodNames(const std::string& state_dir) {
  PodNames names;
  std::ifstream in(state_dir + "/pods.json");
  if (!in) return names;
  const auto file = nlohmann::json::parse(in, nullptr, false);
  if (!file.is_object() || !file.contains("tenants") || !file["tenants"].is_object()) return names;
  for (const auto& [tenant, pod] : file["tenants"].items()) {
    if (!pod.is_object()) continue;
    auto text = [&](const char* key) {
      return pod.contains(key) && pod[key].is_string() ? pod[key].get<std::string>() : std::string();
    };
    names[tenant] = PodName{text("namespace"), text("pod"), text("container")};
  }
  return names;
}

}  // namespace gpuslice
