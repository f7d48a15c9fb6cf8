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
// refuse never reaches a container (the parser's error instead). `tenant` from TenantName.
Result<std::map<std::string, std::string>> ClaimEnvironment(const ClaimDevice& device, const DriverConfig& config,
                                                            const std::string& tenant);

// The gpuslice tenant of a claim: "<namespace>.<name>" (every container of every pod that
// shares the claim shares its booking), shortened with the claim UID's head when over the
// shim's 63 characters.
std::string TenantName(const std::string& claim_namespace, const std::string& claim_name, const std::string& uid);

}  // namespace gpuslice::dra
