#include "dra/driver_directories.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace gpuslice::dra {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// mkdir -p with `mode` for every directory it creates; errno of the first failure.
int MakeDirectories(const std::string& path, mode_t mode) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && !IsDirectory(prefix)) {
      if (mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) return errno;
      // mkdir's mode passes through the umask; the mode asked for is the mode meant.
      if (chmod(prefix.c_str(), mode) != 0) return errno;
    }
    if (slash == std::string::npos) return 0;
  }
}

}  // namespace

Status PrepareDirectories(const DriverConfig& config) {
  if (const int error = MakeDirectories(config.plugin_dir, kPluginDirMode); error != 0) {
    return Status::Error(fmt::format("gpuslice-dra-driver: cannot create the plugin directory {} (--plugin-dir): {}",
                                     config.plugin_dir, std::strerror(error)));
  }
  struct Needed {
    const std::string& path;
    const char* flag;
    const char* whose;
  };
  for (const Needed& n : {Needed{config.registry_dir, "--registry-dir", "the kubelet's plugin registration directory"},
                          Needed{config.cdi_dir, "--cdi-dir", "the container runtime's CDI spec directory"}}) {
    if (!IsDirectory(n.path)) {
      return Status::Error(fmt::format(
          "gpuslice-dra-driver: {} {} is not a directory; it must be {} (the kubelet's root directory or the runtime's cdi_spec_dirs elsewhere?)",
          n.flag, n.path, n.whose));
    }
  }
  return Status::Ok();
}

}  // namespace gpuslice::dra
