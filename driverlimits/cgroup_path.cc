#include "driverlimits/cgroup_path.h"

#include <fstream>
#include <sstream>

namespace gpuslice::driverlimits {

std::string CgroupFromProcFile(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string path = line.substr(3);
    if (path.empty() || path[0] != '/') return "";
    return path == "/" ? "/sys/fs/cgroup" : "/sys/fs/cgroup" + path;
  }
  return "";
}

Result<std::string> CgroupOfProcess(int pid) {
  const std::string file = "/proc/" + std::to_string(pid) + "/cgroup";
  std::ifstream in(file);
  if (!in) return Status::NotFound("cannot read " + file + " (no such process?)");
  std::ostringstream text;
  text << in.rdbuf();
  std::string cgroup = CgroupFromProcFile(text.str());
  if (cgroup.empty()) return Status::NotFound(file + " has no cgroup v2 line (0::): the driver limits cgroup v2 only");
  return cgroup;
}

}  // namespace gpuslice::driverlimits
