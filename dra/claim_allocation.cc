#include "dra/claim_allocation.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "common/printable.h"
#include "common/quantity.h"
#include "dra/cdi_spec.h"

namespace gpuslice::dra {
namespace {

using nlohmann::json;

// "claim <namespace>/<name>", printable whatever the names hold.
std::string Describe(const ResourceClaim& claim) {
  return fmt::format("claim {}/{}", Printable(claim.claim_namespace.empty() ? "?" : claim.claim_namespace),
                     Printable(claim.name.empty() ? "?" : claim.name));
}

// A capacity consumed: "memory" or "<driver>/memory" (a qualified name; the driver's own
// domain may be left out).
const json* Consumed(const AllocatedDevice& result, const std::string& driver, const std::string& name) {
  for (const std::string& key : {name, fmt::format("{}/{}", driver, name)}) {
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
        return Status::InvalidArgument(fmt::format("its gpuslice configuration has apiVersion {}; expected {}",
                                                   ShownInError(value), kConfigApiVersion));
      }
    } else if (key == "kind") {
      if (value != kConfigKind) {
        return Status::InvalidArgument(
            fmt::format("its gpuslice configuration has kind {}; expected {}", ShownInError(value), kConfigKind));
      }
    } else if (key == "computeClass") {
      static const std::set<std::string> kClasses = {"latency", "standard", "background"};
      if (!value.is_string() || !kClasses.count(value.get<std::string>())) {
        return Status::InvalidArgument(
            fmt::format("its gpuslice configuration has computeClass {}; expected latency, standard or background",
                        ShownInError(value)));
      }
      out->compute_class = value.get<std::string>();
    } else if (key == "computeLimit") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 100) {
        return Status::InvalidArgument(
            fmt::format("its gpuslice configuration has computeLimit {}; expected a percentage from 1 to 100",
                        ShownInError(value)));
      }
      out->compute_limit = value.get<int>();
    } else if (key == "memoryLimit") {
      const auto bytes = QuantityValue(value);
      if (!bytes || *bytes == 0) {
        return Status::InvalidArgument(fmt::format(
            "its gpuslice configuration has memoryLimit {}; expected a whole number of bytes above 0 (a quantity such as 16Gi)",
            ShownInError(value)));
      }
      out->memory_limit = *bytes;
    } else {
      return Status::InvalidArgument(fmt::format(
          "its gpuslice configuration has an unknown field '{}'; known: apiVersion, kind, computeClass, computeLimit, memoryLimit",
          Printable(key)));
    }
  }
  if (!parameters.contains("apiVersion") || !parameters.contains("kind")) {
    return Status::InvalidArgument(
        fmt::format("its gpuslice configuration lacks apiVersion or kind ({}, {})", kConfigApiVersion, kConfigKind));
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
      return Status::InvalidArgument(
          fmt::format(" holds share {} of {} but records no consumedCapacity; a share gets only what it consumes",
                      out->share_id, out->device));
    }
    // Allocated without consumable capacity (the feature off): the whole device.
    out->memory = device.gpu.total_memory;
    out->compute = 100;
    return Status::Ok();
  }
  const json* memory = Consumed(result, config.driver_name, "memory");
  const json* compute = Consumed(result, config.driver_name, "compute");
  if (!memory || !compute) {
    return Status::InvalidArgument(fmt::format(
        " records consumedCapacity {} of {} without its {}; the scheduler records every capacity it books (memory and compute)",
        ShownInError(result.consumed), out->device, memory ? "compute" : "memory"));
  }
  const auto bytes = QuantityValue(*memory);
  if (!bytes || *bytes == 0) {
    return Status::InvalidArgument(fmt::format(
        " consumes memory {} of {}: not a whole number of bytes above 0 (a quantity such as 4Gi, 4G or 4e9)",
        ShownInError(*memory), out->device));
  }
  if (*bytes > device.gpu.total_memory) {
    return Status::InvalidArgument(fmt::format(" consumes memory {} of {}, which has {} bytes", ShownInError(*memory),
                                               out->device, device.gpu.total_memory));
  }
  out->memory = *bytes;
  const auto percent = QuantityValue(*compute);
  if (!percent || *percent < 1 || *percent > 100) {
    return Status::InvalidArgument(
        fmt::format(" consumes compute {} of {}, which has 100 (percent)", ShownInError(*compute), out->device));
  }
  out->compute = static_cast<int>(*percent);
  return Status::Ok();
}

// The one result of this driver, checked against this node's devices.
Result<ClaimDevice> ReadDevice(const ResourceClaim& claim, const DriverConfig& config,
                               const std::vector<NodeDevice>& devices) {
  const std::string what = Describe(claim);
  if (!claim.allocated)
    return Status::InvalidArgument(fmt::format("{} is not allocated (no status.allocation.devices)", what));
  std::vector<const AllocatedDevice*> mine;
  for (const AllocatedDevice& result : claim.results) {
    if (result.driver == config.driver_name) mine.push_back(&result);
  }
  if (mine.empty()) {
    return Status::InvalidArgument(fmt::format("{} has no device of driver {}", what, config.driver_name));
  }
  if (mine.size() > 1) {
    return Status::InvalidArgument(fmt::format(
        "{} has {} devices of {}; a container's memory and time are never split over devices: ask for one device per claim",
        what, mine.size(), config.driver_name));
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
    return Status::InvalidArgument(
        fmt::format("{} has shareID {}; expected {}", what, ShownInError(out.share_id), kCdiNamePartRule));
  }
  const NodeDevice* device = out.pool == config.node_name ? FindDevice(devices, out.device) : nullptr;
  if (!device) {
    return Status::InvalidArgument(fmt::format("{} is allocated device {} of pool {}, which node {} does not have",
                                               what, Printable(out.device), Printable(out.pool), config.node_name));
  }
  if (!device->problem.empty()) {
    return Status::Unavailable(
        fmt::format("{} is allocated device {}, which is unhealthy ({}); it is prepared once the device recovers", what,
                    out.device, device->problem));
  }
  out.uuid = device->gpu.uuid;
  out.device_memory = device->gpu.total_memory;
  if (Status consumed = ReadConsumed(result, config, *device, &out); !consumed.ok()) {
    return Status::InvalidArgument(fmt::format("{}{}", what, consumed.message()));
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
        return Status::InvalidArgument(fmt::format("{}: {}", Describe(claim), applied.message()));
      }
    }
  }
  if (out->memory_limit && (out->memory_limit < out->memory || out->memory_limit > out->device_memory)) {
    return Status::InvalidArgument(fmt::format(
        "{} books memory {} of {} ({} bytes) with a memoryLimit of {}; the limit must be at least what is booked and at most the device",
        Describe(claim), out->memory, out->device, out->device_memory, out->memory_limit));
  }
  if (out->compute_limit && out->compute_limit < out->compute) {
    return Status::InvalidArgument(fmt::format(
        "{} books compute {} under its configuration's computeLimit {}; the limit must be at least what is booked",
        Describe(claim), out->compute, out->compute_limit));
  }
  return out;
}

Result<ClaimDevice> ReadClaimAllocation(const json& claim, const DriverConfig& config,
                                        const std::vector<NodeDevice>& devices) {
  const Result<ResourceClaim> parsed = ParseResourceClaim(claim);
  if (!parsed.ok()) return Status::InvalidArgument(fmt::format("the claim is malformed: {}", parsed.message()));
  return ReadClaimAllocation(*parsed, config, devices);
}

}  // namespace gpuslice::dra
