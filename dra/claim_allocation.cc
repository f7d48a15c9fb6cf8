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

// Applies one opaque configuration's parameters; an error on anything but the keys this driver
// defines, with the values it allows.
Status ApplyConfig(const json& parameters, ClaimDevice* out) {
  if (!parameters.is_object()) {
    return Status::InvalidArgument("its gpuslice configuration is not an object");
  }
  for (const auto& [key, value] : parameters.items()) {
    if (key == "apiVersion") {
      if (value != kConfigApiVersion) {
        return Status::InvalidArgument("its gpuslice configuration has apiVersion " + value.dump() + "; expected " +
                                       kConfigApiVersion);
      }
    } else if (key == "kind") {
      if (value != kConfigKind) {
        return Status::InvalidArgument("its gpuslice configuration has kind " + value.dump() + "; expected " +
                                       kConfigKind);
      }
    } else if (key == "computeClass") {
      static const std::set<std::string> kClasses = {"latency", "standard", "background"};
      if (!value.is_string() || !kClasses.count(value.get<std::string>())) {
        return Status::InvalidArgument("its gpuslice configuration has computeClass " + value.dump() +
                                       "; expected latency, standard or background");
      }
      out->compute_class = value.get<std::string>();
    } else if (key == "computeLimit") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 100) {
        return Status::InvalidArgument("its gpuslice configuration has computeLimit " + value.dump() +
                                       "; expected a percentage from 1 to 100");
      }
      out->compute_limit = value.get<int>();
    } else {
      return Status::InvalidArgument("its gpuslice configuration has an unknown field '" + key +
                                     "'; known: apiVersion, kind, computeClass, computeLimit");
    }
  }
  if (!parameters.contains("apiVersion") || !parameters.contains("kind")) {
    return Status::InvalidArgument(std::string("its gpuslice configuration lacks apiVersion or kind (") +
                                   kConfigApiVersion + ", " + kConfigKind + ")");
  }
  return Status::Ok();
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

Result<ClaimDevice> ReadClaimAllocation(const json& claim, const DriverConfig& config,
                                        const std::vector<NodeDevice>& devices) {
  const std::string what = Describe(claim);
  ClaimDevice out;
  const json* allocation = nullptr;
  if (claim.contains("status") && claim["status"].contains("allocation")) allocation = &claim["status"]["allocation"];
  if (!allocation || !allocation->contains("devices")) {
    return Status::InvalidArgument(what + " is not allocated (no status.allocation.devices)");
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
    return Status::InvalidArgument(what + " has no device of driver " + config.driver_name);
  }
  if (mine.size() > 1) {
    return Status::InvalidArgument(
        what + " has " + std::to_string(mine.size()) + " devices of " + config.driver_name +
        "; a container's memory and time are never split over devices: ask for one device per claim");
  }
  const json& result = *mine[0];
  // "<request>/<subrequest>" when a firstAvailable alternative was chosen; the kubelet wants
  // the request's own name back.
  out.request = result.value("request", "");
  out.request = out.request.substr(0, out.request.find('/'));
  out.pool = result.value("pool", "");
  out.device = result.value("device", "");
  out.share_id = result.value("shareID", "");
  const NodeDevice* device = out.pool == config.node_name ? FindDevice(devices, out.device) : nullptr;
  if (!device) {
    return Status::InvalidArgument(what + " is allocated device " + out.device + " of pool " + out.pool +
                                   ", which node " + config.node_name + " does not have");
  }
  if (!device->problem.empty()) {
    return Status::Unavailable(what + " is allocated device " + out.device + ", which is unhealthy (" +
                               device->problem + "); it is prepared once the device recovers");
  }
  out.uuid = device->gpu.uuid;
  // No consumedCapacity: allocated without consumable capacity (the feature off), so the whole device.
  out.memory = device->gpu.total_memory;
  out.compute = 100;
  if (const json* memory = Consumed(result, config.driver_name, "memory")) {
    const auto bytes = QuantityValue(*memory);
    if (!bytes || *bytes == 0) {
      return Status::InvalidArgument(what + " consumes memory " + memory->dump() + " of " + out.device +
                                     ": not a quantity of bytes");
    }
    if (*bytes > device->gpu.total_memory) {
      return Status::InvalidArgument(what + " consumes memory " + memory->dump() + " of " + out.device +
                                     ", which has " + std::to_string(device->gpu.total_memory) + " bytes");
    }
    out.memory = *bytes;
  }
  if (const json* compute = Consumed(result, config.driver_name, "compute")) {
    const auto percent = QuantityValue(*compute);
    if (!percent || *percent < 1 || *percent > 100) {
      return Status::InvalidArgument(what + " consumes compute " + compute->dump() + " of " + out.device +
                                     ", which has 100 (percent)");
    }
    out.compute = static_cast<int>(*percent);
  }
  // The class's configuration first, the claim's over it (the claim is the more specific).
  std::vector<const json*> configs;
  for (const char* source : {"FromClass", "FromClaim"}) {
    for (const auto& c : all_configs) {
      if (c.value("source", "") != source || !c.contains("opaque")) continue;
      if (c["opaque"].value("driver", "") != config.driver_name || !AppliesTo(c, out.request)) continue;
      configs.push_back(&c);
    }
  }
  for (const json* c : configs) {
    if (Status applied = ApplyConfig((*c)["opaque"].value("parameters", json()), &out); !applied.ok()) {
      return Status::InvalidArgument(what + ": " + applied.message());
    }
  }
  if (out.compute_limit && out.compute_limit < out.compute) {
    return Status::InvalidArgument(what + " books compute " + std::to_string(out.compute) +
                                   " under its configuration's computeLimit " + std::to_string(out.compute_limit) +
                                   "; the limit must be at least what is booked");
  }
  return out;
}

}  // namespace gpuslice::dra
