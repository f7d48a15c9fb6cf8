// The cgroup a process is in, as the driver's memory limits name cgroups: the full sysfs path of
// its cgroup v2 directory ("/sys/fs/cgroup" and the "0::" line of /proc/<pid>/cgroup). A
// container's cgroup exists only once the container does: its first process tells it.
#pragma once

#include <string>

#include "common/status.h"

namespace gpuslice::driverlimits {

// /proc/<pid>/cgroup's cgroup v2 path under /sys/fs/cgroup; an error of one line naming the file
// when it cannot be read or has no cgroup v2 line (a host without cgroup v2 has no such limits).
Result<std::string> CgroupOfProcess(int pid);

// The same, from the text of a /proc/<pid>/cgroup file ("" when it has no cgroup v2 line).
std::string CgroupFromProcFile(const std::string& text);

}  // namespace gpuslice::driverlimits
