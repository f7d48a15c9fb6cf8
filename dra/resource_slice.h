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

#include "dra/device_health.h"
#include "dra/driver_config.h"
#include "dra/node_devices.h"

namespace gpuslice::dra {

// The request policy: what a claim that names no amount consumes, and the amounts allowed. A
// claim that names none gets one slice, as the device plugin's gpuslice.io/gpu: 1 does: 1% of
// the device's time and 1/100 of its memory (whole MiB, rounded down), which is also what a
// pod's `gpuslice.io/gpu: 1` gets through the DeviceClass's extendedResourceName.
inline constexpr char kMinimumMemory[] = "1Mi";
inline constexpr int kDefaultComputePercent = 1;
std::string DefaultMemory(uint64_t device_memory);  // "1437Mi" for an H200's 143,771 MiB

// The slice's name: one slice per node and driver ("<node>-<driver>").
std::string ResourceSliceName(const DriverConfig& config);

// The taint an unhealthy device carries: key "<driver>/unhealthy", value the reason
// ("gpu-lost", "xid-48", "nvml-error"), effect NoSchedule, or config.hard_failure_taint for a
// hard failure. Kubernetes 1.36 honours device taints by default (earlier: the DRADeviceTaints
// feature gate; without it the API server drops them).
std::string TaintKey(const DriverConfig& config);

// The whole pool of this node in one slice (at most 8 GPUs × 7 MIG instances: within the
// API's 128 devices). `generation` grows with every change of the devices or their health;
// `conditions` by device name (absent: healthy).
nlohmann::json ResourceSliceJson(const DriverConfig& config, const std::vector<NodeDevice>& devices,
                                 const std::map<std::string, DeviceCondition>& conditions,
                                 const std::string& driver_version, int64_t generation);

}  // namespace gpuslice::dra
