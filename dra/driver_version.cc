#include "dra/driver_version.h"

#include <dlfcn.h>

#include "common/nvml_api.h"
#include "common/unique_fd.h"

namespace gpuslice::dra {

std::string NvmlDriverVersion(const std::string& library) {
  const UniqueDl handle(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!handle) return "";
  std::string version;
  if (auto get =
          reinterpret_cast<decltype(&nvmlSystemGetDriverVersion)>(dlsym(handle.get(), "nvmlSystemGetDriverVersion"))) {
    char text[96] = {};
    if (get(text, sizeof text) == NVML_SUCCESS) version = text;
  }
  return version;
}

}  // namespace gpuslice::dra
