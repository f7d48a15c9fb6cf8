// The simulated NVML's memory queries: a device's memory (under a hard limit of the caller's
// cgroup, the cgroup's view) and the processes holding it.
#include "sim/nvml/nvml_library.h"  // first: NVML's declarations as this library exports them

#include <algorithm>
#include <vector>

#include "sim/memory_partitioning.h"

using namespace gpuslice::sim;
using namespace gpuslice::sim::nvml;

namespace {

struct MemoryFigures {
  uint64_t total, used, free;
};

// The device's memory; under a hard limit of the caller's cgroup (driver r615 and later), the
// cgroup's: the limit as the total, what the cgroup may still take as free.
MemoryFigures Figures(Session& session, int ordinal) {
  const uint64_t total = session.state().device(ordinal).config.total_memory;
  const uint64_t used = std::min(session.MemoryUsed(ordinal), total);
  const gpuslice::sim::CgroupRoom room =
      gpuslice::sim::CgroupRoomOf(session.state(), ordinal, gpuslice::sim::OwnCgroupPath());
  if (room.limit >= total) return {total, used, total - used};
  const uint64_t free = std::min(total - used, room.left);
  return {room.limit, room.limit - std::min(room.limit, free), std::min(free, room.limit)};
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const MemoryFigures figures = Figures(session, ordinal);
    memory->total = figures.total;
    memory->used = figures.used;
    memory->free = figures.free;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const MemoryFigures figures = Figures(session, ordinal);
    memory->total = figures.total;
    memory->reserved = 0;  // the simulated driver keeps nothing back
    memory->used = figures.used;
    memory->free = figures.free;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos) try {
  GPUSLICE_SIM_ENTRY();
  return WithDevice(device, [&](Session& session, int ordinal) {
    if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    SimState& state = session.state();
    state.ReapDeadProcesses();
    const auto& segment = state.segment();
    // A MIG instance lists its own processes; a device in MIG mode those of every instance, with
    // their GPU instance ids (compute instance 0: one per GPU instance).
    std::vector<int> units;
    if (session.IsMig(ordinal) || !state.mig_enabled(ordinal)) units.push_back(ordinal);
    else
      for (int i = 0; i < state.mig_instance_count(); ++i)
        if (segment.mig.instances[i].gpu == ordinal) units.push_back(kMaxDevices + i);
    std::vector<nvmlProcessInfo_t> found;
    for (int unit : units) {
      const auto& dev = state.device(unit);
      const bool mig = session.IsMig(unit);
      const unsigned int gi = mig ? static_cast<unsigned int>(segment.mig.instances[unit - kMaxDevices].gpu_instance_id)
                                  : kNoMigInstance;
      for (int s = 0; s < kMaxProcesses; ++s) {
        if (static_cast<SlotState>(segment.slots[s].state.load()) != SlotState::kLive) continue;
        const uint64_t memory = dev.processes[s].memory_used.load();
        if (memory == 0 && dev.processes[s].contexts.load() == 0) continue;
        found.push_back(
            nvmlProcessInfo_t{static_cast<unsigned int>(segment.slots[s].pid), memory, gi, mig ? 0u : kNoMigInstance});
      }
    }
    const auto needed = static_cast<unsigned int>(found.size());
    if (*infoCount < needed) {
      *infoCount = needed;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (needed > 0 && infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    std::copy(found.begin(), found.end(), infos);
    *infoCount = needed;
    return NVML_SUCCESS;
  });
} catch (...) {
  return EntryFailed<nvmlReturn_t>(__func__);
}

}  // extern "C"
