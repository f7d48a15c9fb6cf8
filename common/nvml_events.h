// NVML's event API, the part that reports XID errors: nvml.h's types and signatures, for the
// tools that load NVML (gpu/gpu_inventory.cc) and for the simulated NVML that exports
// them. Not in common/nvml_api.h, the subset the shim intercepts.
#pragma once

#include "common/nvml_api.h"

typedef struct nvmlEventSet_st* nvmlEventSet_t;

typedef struct nvmlEventData_st {
  nvmlDevice_t device;
  unsigned long long eventType;  // one nvmlEventType* bit
  unsigned long long eventData;  // for nvmlEventTypeXidCriticalError: the XID
  unsigned int gpuInstanceId;    // MIG: the instance the event is about, or 0xFFFFFFFF for the GPU
  unsigned int computeInstanceId;
} nvmlEventData_t;

#define nvmlEventTypeXidCriticalError 0x0000000000000008LL

extern "C" {
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set);
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* eventTypes);
// NVML_ERROR_TIMEOUT when nothing happened within timeoutms.
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);
}
