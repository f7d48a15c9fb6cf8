// The simulated NVML's event API: XID errors (nvmlEventTypeXidCriticalError) injected into the
// simulated GPUs' shared state (SimDevice::xid) reach every event set registered for the GPU
// as they would from the kernel driver. An event set remembers, per GPU, the XID word it last
// saw (at registration: the word then, so that only faults after it are delivered); a wait
// polls the words every 5 ms up to its timeout. XIDs are reported per GPU: a MIG instance's
// handle registers its GPU.
#include <time.h>

#include <mutex>
#include <new>
#include <optional>
#include <vector>

// Exported with default visibility, as the other NVML files' (the version script exports nvml*).
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#pragma GCC visibility push(default)
#include "common/nvml_events.h"
#pragma GCC visibility pop

#include "sim/call_model.h"
#include "sim/nvml/nvml_entry.h"
#include "sim/nvml/nvml_sim_devices.h"
#include "sim/sim_state_layout.h"

struct nvmlEventSet_st {
  struct Watch {
    int gpu;
    uint32_t seen;
  };
  std::mutex mutex;
  std::vector<Watch> watches;
};

namespace {

using gpuslice::sim::nvml::HandleOf;
using gpuslice::sim::nvml::UnitOf;
using gpuslice::sim::nvml::XidWord;

constexpr unsigned long long kSupported = nvmlEventTypeXidCriticalError;
constexpr unsigned int kAllInstances = 0xFFFFFFFFu;

// A MIG instance's GPU; the GPU itself otherwise (units from kMaxDevices on are instances). None
// when the handle names no device of an initialised library.
std::optional<int> GpuOf(nvmlDevice_t device) {
  const std::optional<int> unit = UnitOf(device);
  if (!unit || *unit < gpuslice::sim::kMaxDevices) return unit;
  unsigned int index = 0;
  if (nvmlDeviceGetIndex(device, &index) != NVML_SUCCESS) return std::nullopt;
  return static_cast<int>(index);
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long* eventTypes) try {
  GPUSLICE_SIM_ENTRY();
  if (eventTypes == nullptr || !GpuOf(device)) return NVML_ERROR_INVALID_ARGUMENT;
  *eventTypes = kSupported;
  return NVML_SUCCESS;
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) try {
  GPUSLICE_SIM_ENTRY();
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *set = new (std::nothrow) nvmlEventSet_st;
  return *set ? NVML_SUCCESS : NVML_ERROR_MEMORY;
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) try {
  GPUSLICE_SIM_ENTRY();
  const std::optional<int> found = GpuOf(device);
  uint32_t word = 0;
  if (set == nullptr || !found) return NVML_ERROR_INVALID_ARGUMENT;
  const int gpu = *found;
  if ((eventTypes & ~kSupported) != 0) return NVML_ERROR_NOT_SUPPORTED;
  if (!XidWord(gpu, &word)) return NVML_ERROR_UNINITIALIZED;
  std::lock_guard<std::mutex> lock(set->mutex);
  for (const auto& w : set->watches)
    if (w.gpu == gpu) return NVML_SUCCESS;
  set->watches.push_back({gpu, word});
  return NVML_SUCCESS;
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeoutms) try {
  GPUSLICE_SIM_ENTRY();
  if (set == nullptr || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(set->mutex);
      for (auto& w : set->watches) {
        uint32_t word = 0;
        if (!XidWord(w.gpu, &word)) return NVML_ERROR_UNINITIALIZED;
        if (word == w.seen) continue;
        w.seen = word;
        if ((word & 0xFFFFu) == 0) continue;  // cleared, not a new fault
        *data = nvmlEventData_t{HandleOf(w.gpu), nvmlEventTypeXidCriticalError, word & 0xFFFFu, kAllInstances,
                                kAllInstances};
        return NVML_SUCCESS;
      }
    }
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long long waited_ms = (now.tv_sec - start.tv_sec) * 1000LL + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (waited_ms >= timeoutms) return NVML_ERROR_TIMEOUT;
    const timespec pause{0, 5 * 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) try {
  GPUSLICE_SIM_ENTRY();
  delete set;
  return NVML_SUCCESS;
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

}  // extern "C"
