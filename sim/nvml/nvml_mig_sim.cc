// The simulated NVML's MIG queries (NVML's Multi Instance GPU management, the queries): a GPU's
// MIG mode, its instances' handles and ids. Instances are units kMaxDevices + i of the state.
#include "sim/nvml/nvml_library.h"  // first: NVML's declarations as this library exports them

// The MIG queries are not in common/nvml_api.h (the shim does not use them); declared here with
// nvml.h's signatures so that they are exported.
#pragma GCC visibility push(default)
extern "C" {
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode, unsigned int* pendingMode);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t* migDevice);
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id);
}
#pragma GCC visibility pop

using namespace gpuslice::sim;
using namespace gpuslice::sim::nvml;

extern "C" {

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode, unsigned int* pendingMode) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.IsMig(ordinal)) return NVML_ERROR_NOT_SUPPORTED;
    *currentMode = *pendingMode = session.state().mig_enabled(ordinal) ? 1u : 0u;  // NVML_DEVICE_MIG_ENABLE
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (isMigDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *isMigDevice = session.IsMig(ordinal) ? 1u : 0u;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.IsMig(ordinal)) return NVML_ERROR_NOT_SUPPORTED;
    *count = session.state().mig_enabled(ordinal) ? static_cast<unsigned int>(gpuslice::sim::kMaxMigInstancesPerGpu)
                                                  : 0u;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t* migDevice) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (migDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (session.IsMig(ordinal) || !session.state().mig_enabled(ordinal)) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned int seen = 0;
    for (int i = 0; i < session.state().mig_instance_count(); ++i) {
      if (session.state().segment().mig.instances[i].gpu != ordinal) continue;
      if (seen++ == index) {
        *migDevice = &Handles()[kMaxDevices + i];
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t* device) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(migDevice, [&](Session& session, int ordinal) {
    if (device == nullptr || !session.IsMig(ordinal)) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &Handles()[session.state().segment().mig.instances[ordinal - kMaxDevices].gpu];
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!session.IsMig(ordinal)) return NVML_ERROR_NOT_SUPPORTED;
    *id = static_cast<unsigned int>(session.state().segment().mig.instances[ordinal - kMaxDevices].gpu_instance_id);
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!session.IsMig(ordinal)) return NVML_ERROR_NOT_SUPPORTED;
    *id = 0;  // one compute instance spanning each GPU instance
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

}  // extern "C"
