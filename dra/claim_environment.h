// The environment a prepared claim's container gets (the CDI spec's env): the booked memory
// and compute, the compute class and limit, the tenant, the broker's directory, the preloaded
// library and the one visible device.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "dra/claim_allocation.h"
#include "dra/driver_config.h"

namespace gpuslice::dra {

// The container's environment for a claim's device (GPUSLICE_*, LD_PRELOAD,
// NVIDIA_VISIBLE_DEVICES), checked with the shim's own option parser: a value the shim would
// refuse never reaches a container (the parser's error instead). `tenant` from TenantName (dra/tenant_name.h).
Result<std::map<std::string, std::string>> ClaimEnvironment(const ClaimDevice& device, const DriverConfig& config,
                                                            const std::string& tenant);

}  // namespace gpuslice::dra
