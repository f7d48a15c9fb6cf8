// What each tenant of a plan is told: the exact GPUSLICE_* variables of its slice, the reason
// for its placement, and the Kubernetes resources its pod asks for (docs/kubernetes.md: the
// gpuslice device plugin's gpuslice.io/gpu-memory and gpu-compute, NVIDIA's nvidia.com/mig-*).
#pragma once

#include <cstdint>
#include <string>

#include "ctl/plan_layout.h"

namespace gpuslice::ctl {

// Memory per gpuslice.io/gpu-memory unit: the device plugin's default unitSize.
inline constexpr uint64_t kPluginMemoryUnit = 1ULL << 30;

// GPUSLICE_COMPUTE_REQUEST for a tenant that needs `gpu_percent` of the whole GPU's SMs, in a
// unit holding `unit_sm_percent` of them: rounded up, at most 100.
uint32_t RequestInUnit(uint32_t gpu_percent, double unit_sm_percent);

// "20Gi", "512Mi" or plain bytes: what GPUSLICE_MEMORY_LIMIT reads back as exactly these bytes.
std::string MemoryLimitValue(uint64_t bytes);

// Sets every tenant's env, reason and Kubernetes resources from its placement.
void FillTenantSettings(Plan* plan);

}  // namespace gpuslice::ctl
