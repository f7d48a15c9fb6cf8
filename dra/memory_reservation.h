// What a prepared claim reserves on its device, beyond the CDI spec: its booked memory is held
// in the broker as the tenant's request from NodePrepareResources on — before the container
// starts — so that no borrower takes memory the scheduler promised it, until
// NodeUnprepareResources (docs/accounting.md, "Requests and limits"). Where the driver enforces
// per-cgroup memory limits, the spec also runs gpuslice-driver-limits as the container's
// createRuntime and poststop hooks, which set and clear them on the container's cgroup.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "broker/attach_on_use.h"
#include "common/status.h"
#include "dra/driver_config.h"

namespace gpuslice::dra {

class MemoryReservation {
 public:
  explicit MemoryReservation(std::string state_dir) : broker_(std::move(state_dir)) {}

  // Holds `share`'s request for `tenant` on the GPU. An error with the broker's line when the
  // requests held there would exceed it; when borrowers hold the memory, the request is held all
  // the same and *warning names them.
  Status Hold(const std::string& tenant, const std::string& gpu_uuid, uint64_t gpu_memory, broker::MemoryShare share,
              std::string* warning);
  // Ends what Hold did for `tenant`, on every GPU.
  Status Release(const std::string& tenant);

 private:
  broker::AttachOnUse broker_;
};

// The CDI containerEdits' hooks that set (createRuntime) and clear (poststop) the driver's limits
// on the container's cgroup: hard = the limit, soft = the request. Empty when the driver config
// names no hook program, or for a MIG instance (which the driver's limits do not cover).
nlohmann::json DriverLimitsHooks(const DriverConfig& config, const std::string& tenant, const std::string& gpu_uuid,
                                 broker::MemoryShare share);

}  // namespace gpuslice::dra
