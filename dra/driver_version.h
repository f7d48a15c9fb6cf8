// The NVIDIA driver's version as NVML reports it (nvmlSystemGetDriverVersion), for the
// devices' driverVersion attribute. The library is the one the inventory opened (dlopen of an
// open library only counts a reference); empty when it cannot say.
#pragma once

#include <string>

namespace gpuslice::dra {

std::string NvmlDriverVersion(const std::string& library);

}  // namespace gpuslice::dra
