// What each tenant of a plan is told: the exact GPUSLICE_* variables of its slice, the reason
// for its placement, and the Kubernetes resources its pod asks for (docs/kubernetes.md: the
// gpuslice device plugin's gpuslice.io/gpu, NVIDIA's nvidia.com/mig-*).
#pragma once

#include <cstdint>
#include <string>

#include "ctl/plan_layout.h"

namespace gpuslice::ctl {

// gpuslice.io/gpu slices per device: the device plugin's default slicesPerGpu. A slice is that
// fraction of one device's memory (rounded down to a MiB) and 1% of its time.
inline constexpr int kPluginSlicesPerGpu = 100;

// The slices a tenant asks the device plugin for on a device (GPU or MIG instance) of
// `unit_memory` bytes: enough for its memory and for its compute request, whichever is more.
int PluginSlices(uint64_t memory_bytes, uint32_t request_pct, uint64_t unit_memory);

// GPUSLICE_COMPUTE_REQUEST for a tenant that needs `gpu_percent` of the whole GPU's SMs, in a
// unit holding `unit_sm_percent` of them: rounded up, at most 100.
uint32_t RequestInUnit(uint32_t gpu_percent, double unit_sm_percent);

// "20Gi", "512Mi" or plain bytes: what GPUSLICE_MEMORY_LIMIT reads back as exactly these bytes.
std::string MemoryLimitValue(uint64_t bytes);

// Sets every tenant's env, reason and Kubernetes resources from its placement.
void FillTenantSettings(Plan* plan);

}  // namespace gpuslice::ctl
