// NodePrepareResources and NodeUnprepareResources for one claim, apart from gRPC. Prepare
// reads the claim from the API server, checks its allocation against this node's devices,
// writes the CDI spec, then records the claim in the checkpoint; a claim already in the
// checkpoint is answered from it (the kubelet repeats calls; a restarted driver must not
// prepare twice), only under the namespace and name it was prepared for: a UID names one claim.
// Prepare also holds the claim's booked memory as its tenant's request (dra/memory_reservation.h);
// Unprepare removes the spec, releases the request and removes the record; an unknown claim is
// already unprepared. A UID that is not a UID (it names files and CDI devices) is refused by
// both. A failure changes nothing: no spec, no record, no request held.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "dra/api_client.h"
#include "dra/checkpoint.h"
#include "dra/driver_config.h"
#include "dra/memory_reservation.h"
#include "dra/node_devices.h"

namespace gpuslice::dra {

struct ClaimRef {
  std::string claim_namespace;
  std::string name;
  std::string uid;
};

class ClaimPreparer {
 public:
  ClaimPreparer(DriverConfig config, ApiClient* api);

  static constexpr char kCheckpointFile[] = "checkpoint.json";
  std::string checkpoint_path() const;
  // Reads the checkpoint of an earlier run, having removed the temporaries of a killed one.
  Status Load();
  // The devices claims may name (the last discovery's).
  void SetDevices(std::vector<NodeDevice> devices);

  Result<std::vector<PreparedDevice>> Prepare(const ClaimRef& claim);
  Status Unprepare(const ClaimRef& claim);
  size_t prepared() const;

 private:
  const DriverConfig config_;
  ApiClient* const api_;
  mutable Mutex mutex_;  // one claim at a time: the checkpoint is one file
  std::vector<NodeDevice> devices_ GUARDED_BY(mutex_);
  PreparedClaims claims_ GUARDED_BY(mutex_);
  MemoryReservation memory_ GUARDED_BY(mutex_);
};

}  // namespace gpuslice::dra
