// The ResourceSlice (resource.k8s.io/v1) that publishes this node's devices to the scheduler.
// Each device allows multiple allocations and has two consumable capacities: `memory` (bytes)
// and `compute` (percent of the device's time). The scheduler keeps the sum of what the claims
// on a device consume within those capacities, and gpuslice enforces each claim's consumption
// in the container (dra/claim_allocation.h), so what the scheduler books is what a tenant gets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dra/driver_config.h"
#include "dra/node_devices.h"

namespace gpuslice::dra {

// The request policy: what a claim that names no amount consumes, and the amounts allowed.
inline constexpr char kDefaultMemory[] = "1Gi";
inline constexpr char kMinimumMemory[] = "1Mi";
inline constexpr int kDefaultComputePercent = 10;

// The slice's name: one slice per node and driver ("<node>-<driver>").
std::string ResourceSliceName(const DriverConfig& config);

// The whole pool of this node in one slice (at most 8 GPUs × 7 MIG instances: within the
// API's 128 devices). `generation` grows with every change of the device list.
nlohmann::json ResourceSliceJson(const DriverConfig& config, const std::vector<NodeDevice>& devices,
                                 const std::string& driver_version, int64_t generation);

}  // namespace gpuslice::dra
