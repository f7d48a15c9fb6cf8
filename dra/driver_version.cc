#include "dra/driver_version.h"

#include <dlfcn.h>

#include "common/nvml_api.h"

namespace gpuslice::dra {

std::string NvmlDriverVersion(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return "";
  std::string version;
  if (auto get = reinterpret_cast<decltype(&nvmlSystemGetDriverVersion)>(dlsym(handle, "nvmlSystemGetDriverVersion"))) {
    char text[96] = {};
    if (get(text, sizeof text) == NVML_SUCCESS) version = text;
  }
  dlclose(handle);
  return version;
}

}  // namespace gpuslice::dra
