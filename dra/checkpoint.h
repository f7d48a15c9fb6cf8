// The claims this node has prepared, kept in a file so that a restarted driver answers the
// kubelet's repeated NodePrepareResources with what it prepared before (never preparing a
// claim twice, never reading a claim the API server may since have changed) and can still
// unprepare claims it prepared before the restart. Format: {"version": 1, "claims": {uid:
// {"namespace", "name", "devices": [{"request", "pool", "device", "cdiDeviceIds": [...],
// "shareID" (only for a share)}]}}};
// a file of another version is refused, not guessed at.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpuslice::dra {

struct PreparedDevice {
  std::string request;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;
  std::string share_id;  // the allocation's shareID; empty for a device allocated whole
};

struct PreparedClaim {
  std::string claim_namespace;
  std::string name;
  std::vector<PreparedDevice> devices;
};

using PreparedClaims = std::map<std::string, PreparedClaim>;  // by claim UID

// A missing file is an empty checkpoint (a first start).
Result<PreparedClaims> LoadCheckpoint(const std::string& path);
// Written to a temporary file and renamed: a crash leaves the old or the new one, whole.
Status SaveCheckpoint(const std::string& path, const PreparedClaims& claims);

}  // namespace gpuslice::dra
