#include "dra/claim_allocation.h"

#include <algorithm>
#include <set>

#include "common/printable.h"
#include "common/quantity.h"
#include "dra/cdi_spec.h"

namespace gpuslice::dra {
namespace {

using nlohmann::json;

// "claim <namespace>/<name>", printable whatever the names hold.
std::string Describe(const ResourceClaim& claim) {
  return "claim " + Printable(claim.claim_namespace.empty() ? "?" : claim.claim_namespace) + "/" +
         Printable(claim.name.empty() ? "?" : claim.name);
}

// A capacity consumed: "memory" or "<driver>/memory" (a qualified name; the driver's own
// domain may be left out).
const json* Consumed(const AllocatedDevice& result, const std::string& driver, const std::string& name) {
  for (const std::string& key : {name, driver + "/" + name}) {
    if (const auto it = result.consumed.find(key); it != result.consumed.end()) return &*it;
  }
  return nullptr;
}

// A quantity as the API server writes one (a string), or as a JSON number, which the API server
// reads with the same grammar.
std::optional<uint64_t> QuantityValue(const json& value) {
  if (value.is_string()) return ParseByteQuantity(value.get_ref<const std::string&>());
  if (value.is_number()) return ParseByteQuantity(value.dump());
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
        return Status::InvalidArgument("its gpuslice configuration has apiVersion " + ShownInError(value) +
                                       "; expected " + kConfigApiVersion);
      }
    } else if (key == "kind") {
      if (value != kConfigKind) {
        return Status::InvalidArgument("its gpuslice configuration has kind " + ShownInError(value) + "; expected " +
                                       kConfigKind);
      }
    } else if (key == "computeClass") {
      static const std::set<std::string> kClasses = {"latency", "standard", "background"};
      if (!value.is_string() || !kClasses.count(value.get<std::string>())) {
        return Status::InvalidArgument("its gpuslice configuration has computeClass " + ShownInError(value) +
                                       "; expected latency, standard or background");
      }
      out->compute_class = value.get<std::string>();
    } else if (key == "computeLimit") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 100) {
        return Status::InvalidArgument("its gpuslice configuration has computeLimit " + ShownInError(value) +
                                       "; expected a percentage from 1 to 100");
      }
      out->compute_limit = value.get<int>();
    } else if (key == "memoryLimit") {
      const auto bytes = QuantityValue(value);
      if (!bytes || *bytes == 0) {
        return Status::InvalidArgument("its gpuslice configuration has memoryLimit " + ShownInError(value) +
                                       "; expected a whole number of bytes above 0 (a quantity such as 16Gi)");
      }
      out->memory_limit = *bytes;
    } else {
      return Status::InvalidArgument("its gpuslice configuration has an unknown field '" + Printable(key) +
                                     "'; known: apiVersion, kind, computeClass, computeLimit, memoryLimit");
    }
  }
  if (!parameters.contains("apiVersion") || !parameters.contains("kind")) {
    return Status::InvalidArgument(std::string("its gpuslice configuration lacks apiVersion or kind (") +
                                   kConfigApiVersion + ", " + kConfigKind + ")");
  }
  return Status::Ok();
}

bool AppliesTo(const AllocatedConfig& config, const std::string& request) {
  if (config.requests.empty()) return true;
  for (const std::string& name : config.requests) {
    // "<request>" or "<request>/<subrequest>": the kubelet's result names the main request.
    if (name == request || name.substr(0, name.find('/')) == request.substr(0, request.find('/'))) return true;
  }
  return false;
}

// What the result consumes of `device`: its memory and compute. Fails closed: a share, or a result
// that records any consumption, must record both, or nothing is prepared.
Status ReadConsumed(const AllocatedDevice& result, const DriverConfig& config, const NodeDevice& device,
                    ClaimDevice* out) {
  if (!result.has_consumed) {
    if (!out->share_id.empty()) {
      return Status::InvalidArgument(" holds share " + out->share_id + " of " + out->device +
                                     " but records no consumedCapacity; a share gets only what it consumes");
    }
    // Allocated without consumable capacity (the feature off): the whole device.
    out->memory = device.gpu.total_memory;
    out->compute = 100;
    return Status::Ok();
  }
  const json* memory = Consumed(result, config.driver_name, "memory");
  const json* compute = Consumed(result, config.driver_name, "compute");
  if (!memory || !compute) {
    return Status::InvalidArgument(" records consumedCapacity " + ShownInError(result.consumed) + " of " + out->device +
                                   " without its " + (memory ? "compute" : "memory") +
                                   "; the scheduler records every capacity it books (memory and compute)");
  }
  const auto bytes = QuantityValue(*memory);
  if (!bytes || *bytes == 0) {
    return Status::InvalidArgument(" consumes memory " + ShownInError(*memory) + " of " + out->device +
                                   ": not a whole number of bytes above 0 (a quantity such as 4Gi, 4G or 4e9)");
  }
  if (*bytes > device.gpu.total_memory) {
    return Status::InvalidArgument(" consumes memory " + ShownInError(*memory) + " of " + out->device + ", which has " +
                                   std::to_string(device.gpu.total_memory) + " bytes");
  }
  out->memory = *bytes;
  const auto percent = QuantityValue(*compute);
  if (!percent || *percent < 1 || *percent > 100) {
    return Status::InvalidArgument(" consumes compute " + ShownInError(*compute) + " of " + out->device +
                                   ", which has 100 (percent)");
  }
  out->compute = static_cast<int>(*percent);
  return Status::Ok();
}

// The one result of this driver, checked against this node's devices.
Result<ClaimDevice> ReadDevice(const ResourceClaim& claim, const DriverConfig& config,
                               const std::vector<NodeDevice>& devices) {
  const std::string what = Describe(claim);
  if (!claim.allocated) return Status::InvalidArgument(what + " is not allocated (no status.allocation.devices)");
  std::vector<const AllocatedDevice*> mine;
  for (const AllocatedDevice& result : claim.results) {
    if (result.driver == config.driver_name) mine.push_back(&result);
  }
  if (mine.empty()) {
    return Status::InvalidArgument(what + " has no device of driver " + config.driver_name);
  }
  if (mine.size() > 1) {
    return Status::InvalidArgument(
        what + " has " + std::to_string(mine.size()) + " devices of " + config.driver_name +
        "; a container's memory and time are never split over devices: ask for one device per claim");
  }
  const AllocatedDevice& result = *mine[0];
  ClaimDevice out;
  // "<request>/<subrequest>" when a firstAvailable alternative was chosen; the kubelet wants
  // the request's own name back.
  out.request = result.request.substr(0, result.request.find('/'));
  out.pool = result.pool;
  out.device = result.device;
  out.share_id = result.share_id;
  if (!out.share_id.empty() && !ValidCdiNamePart(out.share_id)) {
    return Status::InvalidArgument(what + " has shareID " + ShownInError(out.share_id) + "; expected " +
                                   kCdiNamePartRule);
  }
  const NodeDevice* device = out.pool == config.node_name ? FindDevice(devices, out.device) : nullptr;
  if (!device) {
    return Status::InvalidArgument(what + " is allocated device " + Printable(out.device) + " of pool " +
                                   Printable(out.pool) + ", which node " + config.node_name + " does not have");
  }
  if (!device->problem.empty()) {
    return Status::Unavailable(what + " is allocated device " + out.device + ", which is unhealthy (" +
                               device->problem + "); it is prepared once the device recovers");
  }
  out.uuid = device->gpu.uuid;
  out.device_memory = device->gpu.total_memory;
  if (Status consumed = ReadConsumed(result, config, *device, &out); !consumed.ok()) {
    return Status::InvalidArgument(what + consumed.message());
  }
  return out;
}

}  // namespace

Result<ClaimDevice> ReadClaimAllocation(const ResourceClaim& claim, const DriverConfig& config,
                                        const std::vector<NodeDevice>& devices) {
  Result<ClaimDevice> out = ReadDevice(claim, config, devices);
  if (!out.ok()) return out;
  // The class's configuration first, the claim's over it (the claim is the more specific).
  for (const char* source : {"FromClass", "FromClaim"}) {
    for (const AllocatedConfig& c : claim.configs) {
      if (c.source != source || c.driver != config.driver_name || !AppliesTo(c, out->request)) continue;
      if (Status applied = ApplyConfig(c.parameters, &*out); !applied.ok()) {
        return Status::InvalidArgument(Describe(claim) + ": " + applied.message());
      }
    }
  }
  if (out->memory_limit && (out->memory_limit < out->memory || out->memory_limit > out->device_memory)) {
    return Status::InvalidArgument(Describe(claim) + " books memory " + std::to_string(out->memory) + " of " +
                                   out->device + " (" + std::to_string(out->device_memory) +
                                   " bytes) with a memoryLimit of " + std::to_string(out->memory_limit) +
                                   "; the limit must be at least what is booked and at most the device");
  }
  if (out->compute_limit && out->compute_limit < out->compute) {
    return Status::InvalidArgument(Describe(claim) + " books compute " + std::to_string(out->compute) +
                                   " under its configuration's computeLimit " + std::to_string(out->compute_limit) +
                                   "; the limit must be at least what is booked");
  }
  return out;
}

Result<ClaimDevice> ReadClaimAllocation(const json& claim, const DriverConfig& config,
                                        const std::vector<NodeDevice>& devices) {
  const Result<ResourceClaim> parsed = ParseResourceClaim(claim);
  if (!parsed.ok()) return Status::InvalidArgument("the claim is malformed: " + parsed.message());
  return ReadClaimAllocation(*parsed, config, devices);
}

}  // namespace gpuslice::dra
