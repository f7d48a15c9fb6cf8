// The shim's variables as the tools that hand them to a tenant write them (the device plugin,
// the DRA driver, gpuslicectl plan): the exact text form of a quota, and the shim's own verdict
// on a set of GPUSLICE_* values before they reach a container. In the option library
// (gpuslice_options), which the tools link; libgpuslice.so does not carry it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"

namespace gpuslice::shim {

// "8Gi", "512Mi" or plain bytes: the shortest form GPUSLICE_MEMORY_LIMIT reads back as exactly
// `bytes`.
std::string QuotaText(uint64_t bytes);

// Whether the shim's option parser accepts the GPUSLICE_* entries of `env` (others are ignored):
// its error, with its one line, when it does not. A value the shim would refuse must never reach
// a container: the tenant would fail closed at its first CUDA call, far from the cause.
Status ShimAccepts(const std::map<std::string, std::string>& env);

}  // namespace gpuslice::shim
