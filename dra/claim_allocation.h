// What a ResourceClaim's allocation gives a container on this node: the one device the
// scheduler chose, the memory and compute it booked there (status.allocation.devices.results[]
// .consumedCapacity) and the compute class and limit of the claim's or its class's opaque
// configuration. Everything is checked against this node's devices before anything is written:
// a device the node does not have, more than the device holds, a consumption that does not record
// both memory and compute, or a configuration the driver does not understand is refused with one
// line naming the claim, and nothing changes. It fails closed: what is not understood gets
// nothing, never the whole device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "dra/driver_config.h"
#include "dra/node_devices.h"
#include "dra/resource_claim.h"

namespace gpuslice::dra {

// The opaque configuration's parameters (DeviceClass or ResourceClaim spec.devices.config[]
// .opaque with driver = this driver): {"apiVersion": "gpu.gpuslice.io/v1alpha1", "kind":
// "GpuSliceConfig", "computeClass": "latency|standard|background", "computeLimit": 1-100,
// "memoryLimit": a quantity ("16Gi") at least the booked memory and at most the device's: what
// the tenant may borrow up to beyond the memory it booked, which is its request}.
inline constexpr char kConfigApiVersion[] = "gpu.gpuslice.io/v1alpha1";
inline constexpr char kConfigKind[] = "GpuSliceConfig";

struct ClaimDevice {
  std::string request;  // the claim's request name the device was allocated for
  std::string pool;
  std::string device;
  std::string share_id;        // the result's shareID (a share of a device that allows many); empty: whole
  std::string uuid;            // what NVIDIA_VISIBLE_DEVICES names
  uint64_t device_memory = 0;  // the device's whole memory
  uint64_t memory = 0;         // bytes booked: the tenant's memory request
  uint64_t memory_limit = 0;   // the configuration's memoryLimit; 0: the booked memory
  int compute = 0;             // percent of the device's time booked
  std::string compute_class;   // empty: the shim's default
  int compute_limit = 0;       // 0: none
};

// The claim's device on this node, or an error with one line (InvalidArgument; Unavailable for an
// unhealthy device).
Result<ClaimDevice> ReadClaimAllocation(const ResourceClaim& claim, const DriverConfig& config,
                                        const std::vector<NodeDevice>& devices);
// The same from the API server's ResourceClaim object as it came (ParseResourceClaim first).
Result<ClaimDevice> ReadClaimAllocation(const nlohmann::json& claim, const DriverConfig& config,
                                        const std::vector<NodeDevice>& devices);

}  // namespace gpuslice::dra
