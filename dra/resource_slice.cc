#include "dra/resource_slice.h"

#include <algorithm>

#include <fmt/format.h>

namespace gpuslice::dra {
namespace {

nlohmann::json Text(const std::string& value) { return {{"string", value.substr(0, 64)}}; }
nlohmann::json Int(int64_t value) { return {{"int", value}}; }

nlohmann::json DeviceJson(const NodeDevice& device, const std::string& driver_version) {
  // Attributes, capacities; taints are added by the caller.
  const auto& gpu = device.gpu;
  nlohmann::json attributes = {
      {"type", Text(gpu.mig_index >= 0 ? "mig" : "gpu")},
      {"uuid", Text(gpu.uuid)},
      {"productName", Text(gpu.name)},
      {"model", Text(Model(device))},
      {"index", Int(gpu.index)},
  };
  if (gpu.mig_index >= 0) {
    attributes["migIndex"] = Int(gpu.mig_index);
    attributes["migProfile"] = Text(MigProfile(device));
    attributes["parentUUID"] = Text(gpu.parent_uuid);
  }
  if (gpu.numa_node) attributes["numaNode"] = Int(*gpu.numa_node);
  // A string, not a `version`: NVIDIA's "535.104.05" is not semver (a leading zero).
  if (!driver_version.empty()) attributes["driverVersion"] = Text(driver_version);
  nlohmann::json capacity = {
      {"memory",
       {{"value", fmt::to_string(gpu.total_memory)},
        {"requestPolicy", {{"default", DefaultMemory(gpu.total_memory)}, {"validRange", {{"min", kMinimumMemory}}}}}}},
      {"compute",
       {{"value", "100"},
        {"requestPolicy",
         {{"default", fmt::to_string(kDefaultComputePercent)},
          {"validRange", {{"min", "1"}, {"max", "100"}, {"step", "1"}}}}}}},
  };
  return {{"name", device.name},
          {"allowMultipleAllocations", true},
          {"attributes", attributes},
          {"capacity", capacity}};
}

}  // namespace

std::string DefaultMemory(uint64_t device_memory) {
  return fmt::format("{}Mi", std::max<uint64_t>(1, (device_memory >> 20) / 100));
}

std::string TaintKey(const DriverConfig& config) { return fmt::format("{}/unhealthy", config.driver_name); }

std::string ResourceSliceName(const DriverConfig& config) {
  return fmt::format("{}-{}", config.node_name, config.driver_name);
}

nlohmann::json ResourceSliceJson(const DriverConfig& config, const std::vector<NodeDevice>& devices,
                                 const std::map<std::string, DeviceCondition>& conditions,
                                 const std::string& driver_version, int64_t generation) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& device : devices) {
    nlohmann::json json = DeviceJson(device, driver_version);
    const auto c = conditions.find(device.name);
    if (c != conditions.end() && !c->second.healthy) {
      json["taints"] = {{{"key", TaintKey(config)},
                         {"value", c->second.reason},
                         {"effect", c->second.hard ? config.hard_failure_taint : "NoSchedule"}}};
    }
    list.push_back(std::move(json));
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", ResourceSliceName(config)}}},
          {"spec",
           {{"driver", config.driver_name},
            {"nodeName", config.node_name},
            {"pool", {{"name", config.node_name}, {"generation", generation}, {"resourceSliceCount", 1}}},
            {"devices", list}}}};
}

}  // namespace gpuslice::dra
