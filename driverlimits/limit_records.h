// What the node set in the driver, remembered in the broker's state directory: one record per
// container and GPU whose cgroup has driver memory limits (<state dir>/driver-limits/
// <container id>.<GPU UUID>.json), written after the limits were set and removed once they are
// cleared. gpuslicectl status reads them and asks the driver whether each limit still holds, so
// that "driver-enforced" is what the driver says, not what a record claims.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace gpuslice::driverlimits {

struct LimitRecord {
  std::string container;  // the container runtime's ID
  std::string tenant;
  std::string gpu_uuid;  // "GPU-..."
  std::string cgroup;    // "/sys/fs/cgroup/..."
  uint64_t soft = 0;     // the tenant's request
  uint64_t hard = 0;     // the tenant's limit
};

std::string RecordsDir(const std::string& state_dir);

// Written whole or not at all (a reader never sees half of one); the directory is created (0750).
// InvalidArgument for a container ID or UUID that cannot be part of a file name.
Status WriteRecord(const std::string& state_dir, const LimitRecord& record);
// Every readable record; files that are not records are left out.
std::vector<LimitRecord> ReadRecords(const std::string& state_dir);
// The container's records.
std::vector<LimitRecord> RecordsOf(const std::string& state_dir, const std::string& container);
Status RemoveRecord(const std::string& state_dir, const LimitRecord& record);

}  // namespace gpuslice::driverlimits
