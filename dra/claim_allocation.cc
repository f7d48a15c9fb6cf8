#include "dra/claim_allocation.h"

#include <algorithm>
#include <set>

#include "common/quantity.h"

namespace gpuslice::dra {
namespace {

using nlohmann::json;

std::string Describe(const json& claim) {
  const json& meta = claim.value("metadata", json::object());
  return "claim " + meta.value("namespace", std::string("?")) + "/" + meta.value("name", std::string("?"));
}

// A capacity consumed: "memory" or "<driver>/memory" (a qualified name; the driver's own
// domain may be left out).
const json* Consumed(const json& result, const std::string& driver, const std::string& name) {
  if (!result.contains("consumedCapacity") || !result["consumedCapacity"].is_object()) return nullptr;
  const json& consumed = result["consumedCapacity"];
  for (const std::string& key : {name, driver + "/" + name}) {
    if (consumed.contains(key)) return &consumed[key];
  }
  return nullptr;
}

std::optional<uint64_t> QuantityValue(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_string()) return ParseByteQuantity(value.get<std::string>());
  return std::nullopt;
}

// Applies one opaque configuration's parameters; false with *error on anything but the keys
// this driver defines, with the values it allows.
bool ApplyConfig(const json& parameters, ClaimDevice* out, std::string* error) {
  if (!parameters.is_object()) {
    *error = "its gpuslice configuration is not an object";
    return false;
  }
  for (const auto& [key, value] : parameters.items()) {
    if (key == "apiVersion") {
      if (value != kConfigApiVersion) {
        *error = "its gpuslice configuration has apiVersion " + value.dump() + "; expected " + kConfigApiVersion;
        return false;
      }
    } else if (key == "kind") {
      if (value != kConfigKind) {
        *error = "its gpuslice configuration has kind " + value.dump() + "; expected " + kConfigKind;
        return false;
      }
    } else if (key == "computeClass") {
      static const std::set<std::string> kClasses = {"latency", "standard", "background"};
      if (!value.is_string() || !kClasses.count(value.get<std::string>())) {
        *error = "its gpuslice configuration has computeClass " + value.dump() + "; expected latency, standard or background";
        return false;
      }
      out->compute_class = value.get<std::string>();
    } else if (key == "computeLimit") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 100) {
        *error = "its gpuslice configuration has computeLimit " + value.dump() + "; expected a percentage from 1 to 100";
        return false;
      }
      out->compute_limit = value.get<int>();
    } else {
      *error = "its gpuslice configuration has an unknown field '" + key +
               "'; known: apiVersion, kind, computeClass, computeLimit";
      return false;
    }
  }
  if (!parameters.contains("apiVersion") || !parameters.contains("kind")) {
    *error = std::string("its gpuslice configuration lacks apiVersion or kind (") + kConfigApiVersion + ", " + kConfigKind + ")";
    return false;
  }
  return true;
}

bool AppliesTo(const json& config, const std::string& request) {
  if (!config.contains("requests") || config["requests"].empty()) return true;
  for (const auto& r : config["requests"]) {
    // "<request>" or "<request>/<subrequest>": the kubelet's result names the main request.
    const std::string name = r.get<std::string>();
    if (name == request || name.substr(0, name.find('/')) == request.substr(0, request.find('/'))) return true;
  }
  return false;
}

}  // namespace

bool ReadClaimAllocation(const json& claim, const DriverConfig& config, const std::vector<NodeDevice>& devices,
                         ClaimDevice* out, std::string* error) {
  const std::string what = Describe(claim);
  const json* allocation = nullptr;
  if (claim.contains("status") && claim["status"].contains("allocation")) allocation = &claim["status"]["allocation"];
  if (!allocation || !allocation->contains("devices")) {
    *error = what + " is not allocated (no status.allocation.devices)";
    return false;
  }
  const json& allocated = (*allocation)["devices"];
  // Pointers into `allocated` itself (json::value() would return a copy).
  static const json kNone = json::array();
  const json& results = allocated.contains("results") ? allocated["results"] : kNone;
  const json& all_configs = allocated.contains("config") ? allocated["config"] : kNone;
  std::vector<const json*> mine;
  for (const auto& result : results) {
    if (result.value("driver", "") == config.driver_name) mine.push_back(&result);
  }
  if (mine.empty()) {
    *error = what + " has no device of driver " + config.driver_name;
    return false;
  }
  if (mine.size() > 1) {
    *error = what + " has " + std::to_string(mine.size()) + " devices of " + config.driver_name +
             "; a container's memory and time are never split over devices: ask for one device per claim";
    return false;
  }
  const json& result = *mine[0];
  // "<request>/<subrequest>" when a firstAvailable alternative was chosen; the kubelet wants
  // the request's own name back.
  out->request = result.value("request", "");
  out->request = out->request.substr(0, out->request.find('/'));
  out->pool = result.value("pool", "");
  out->device = result.value("device", "");
  const NodeDevice* device = out->pool == config.node_name ? FindDevice(devices, out->device) : nullptr;
  if (!device) {
    *error = what + " is allocated device " + out->device + " of pool " + out->pool + ", which node " +
             config.node_name + " does not have";
    return false;
  }
  out->uuid = device->gpu.uuid;
  // No consumedCapacity: allocated without consumable capacity (the feature off), so the whole device.
  out->memory = device->gpu.total_memory;
  out->compute = 100;
  if (const json* memory = Consumed(result, config.driver_name, "memory")) {
    const auto bytes = QuantityValue(*memory);
    if (!bytes || *bytes == 0) {
      *error = what + " consumes memory " + memory->dump() + " of " + out->device + ": not a quantity of bytes";
      return false;
    }
    if (*bytes > device->gpu.total_memory) {
      *error = what + " consumes memory " + memory->dump() + " of " + out->device + ", which has " +
               std::to_string(device->gpu.total_memory) + " bytes";
      return false;
    }
    out->memory = *bytes;
  }
  if (const json* compute = Consumed(result, config.driver_name, "compute")) {
    const auto percent = QuantityValue(*compute);
    if (!percent || *percent < 1 || *percent > 100) {
      *error = what + " consumes compute " + compute->dump() + " of " + out->device + ", which has 100 (percent)";
      return false;
    }
    out->compute = static_cast<int>(*percent);
  }
  // The class's configuration first, the claim's over it (the claim is the more specific).
  std::vector<const json*> configs;
  for (const char* source : {"FromClass", "FromClaim"}) {
    for (const auto& c : all_configs) {
      if (c.value("source", "") != source || !c.contains("opaque")) continue;
      if (c["opaque"].value("driver", "") != config.driver_name || !AppliesTo(c, out->request)) continue;
      configs.push_back(&c);
    }
  }
  for (const json* c : configs) {
    std::string why;
    if (!ApplyConfig((*c)["opaque"].value("parameters", json()), out, &why)) {
      *error = what + ": " + why;
      return false;
    }
  }
  if (out->compute_limit && out->compute_limit < out->compute) {
    *error = what + " books compute " + std::to_string(out->compute) + " under its configuration's computeLimit " +
             std::to_string(out->compute_limit) + "; the limit must be at least what is booked";
    return false;
  }
  return true;
}

}  // namespace gpuslice::dra
