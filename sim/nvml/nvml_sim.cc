// The simulated libnvidia-ml.so.1: NVML's view of the simulated GPUs, read from the shared state
// the simulated libcuda writes (nvml_library.h has the model). Monitoring tools (nvidia-smi-like
// pollers, pynvml, device plugins) and the shim's NVML hooks run against it unchanged. This file:
// initialisation, the error strings, the system's versions, the devices and their identity; the
// other queries are in nvml_*_sim.cc by what they ask about.
#include "sim/nvml/nvml_library.h"  // first: NVML's declarations as this library exports them

#include <cstring>
#include <string>

// This library's line in GPUSLICE_SIM_CALL_COUNTS (sim/call_model.h).
static const bool kCallModelNamed = (gpuslice::sim::call_model::SetLibraryName("nvml"), true);

using namespace gpuslice::sim;
using namespace gpuslice::sim::nvml;

namespace {

// The driver's version is its branch (GPUSLICE_SIM_DRIVER_VERSION, 580 by default) and this.
constexpr char kDriverVersionSuffix[] = ".00-sim";
constexpr int kCudaDriverVersion = 13000;

nvmlReturn_t DeviceCount(unsigned int* count) noexcept {
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *count = static_cast<unsigned int>(session.state().device_count());
    return NVML_SUCCESS;
  });
}

nvmlReturn_t HandleByIndex(unsigned int index, nvmlDevice_t* device) noexcept {
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    if (device == nullptr || index >= static_cast<unsigned int>(session.state().device_count()))
      return NVML_ERROR_INVALID_ARGUMENT;
    *device = &Handles()[index];
    return NVML_SUCCESS;
  });
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2(void) try {
  GPUSLICE_SIM_ENTRY();
  return InitLibrary();
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}
nvmlReturn_t nvmlInit(void) try {
  GPUSLICE_SIM_ENTRY();
  return InitLibrary();
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}
// Both flags (no GPUs needed, no attach) only relax what a real driver checks at init.
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) try {
  GPUSLICE_SIM_ENTRY();
  return InitLibrary();
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlShutdown(void) try {
  GPUSLICE_SIM_ENTRY();
  return ShutdownLibrary();
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

const char* nvmlErrorString(nvmlReturn_t result) try {
  GPUSLICE_SIM_ENTRY();
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_ENABLED: return "ECC is not enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
  }
} catch (...) {
  return EntryFailed<const char*>(__func__);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) try {
  GPUSLICE_SIM_ENTRY();
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    return CopyString(std::to_string(session.state().segment().partitioning.driver_branch) + kDriverVersionSuffix,
                      version, length);
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) try {
  GPUSLICE_SIM_ENTRY();
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = kCudaDriverVersion;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) try {
  GPUSLICE_SIM_ENTRY();
  return nvmlSystemGetCudaDriverVersion(cudaDriverVersion);
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) try {
  GPUSLICE_SIM_ENTRY();
  return DeviceCount(deviceCount);
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) try {
  GPUSLICE_SIM_ENTRY();
  return DeviceCount(deviceCount);
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) try {
  GPUSLICE_SIM_ENTRY();
  return HandleByIndex(index, device);
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) try {
  GPUSLICE_SIM_ENTRY();
  return HandleByIndex(index, device);
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) try {
  GPUSLICE_SIM_ENTRY();
  return Guarded([&]() -> nvmlReturn_t {
    Session session;
    if (!session.ok()) return NVML_ERROR_UNINITIALIZED;
    if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < kMaxUnits; ++i) {
      if (session.Ordinal(&Handles()[i]) == i && session.Uuid(i) == uuid) {
        *device = &Handles()[i];
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device,
                    [&](Session& session, int ordinal) { return CopyString(session.Uuid(ordinal), uuid, length); });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    const auto& config = session.state().device(ordinal).config;
    return CopyString(std::string(config.name, strnlen(config.name, sizeof config.name)), name, length);
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    // A MIG instance answers with its GPU's index.
    *index = static_cast<unsigned int>(
        session.IsMig(ordinal) ? session.state().segment().mig.instances[ordinal - kMaxDevices].gpu : ordinal);
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *major = session.state().device(ordinal).config.cc_major;
    *minor = session.state().device(ordinal).config.cc_minor;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

}  // extern "C"
