#include "gpuslice/sim_query.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "sim/sim_config.h"
#include "sim/sim_state.h"

namespace gpuslice::simquery {

std::string StatePath() { return sim::SimStatePath(); }

bool TakeSnapshot(const std::string& path, Snapshot* out, std::string* error) {
  auto state = sim::SimState::OpenExisting(path, error);
  if (!state) return false;
  state->ReapDeadProcesses();
  sim::SimSegment& seg = state->segment();
  Snapshot snap;
  snap.taken_ns = MonotonicNanos();
  snap.state_path = path;
  for (int d = 0; d < state->device_count(); ++d) {
    const sim::SimDevice& dev = seg.devices[d];
    DeviceSnapshot ds;
    ds.ordinal = d;
    ds.name = dev.config.name;
    ds.uuid = sim::FormatGpuUuid(dev.config.uuid);
    ds.total_memory = dev.config.total_memory;
    ds.busy_ns = dev.busy_ns.load();
    ds.handovers = dev.arbiter.handovers.load();
    ds.timeslice_ns = dev.config.timeslice_ns;
    ds.sm_count = dev.config.sm_count;
    ds.cc_major = dev.config.cc_major;
    ds.cc_minor = dev.config.cc_minor;
    ds.running_slot = static_cast<int>(dev.arbiter.owner.load()) - 1;
    for (int s = 0; s < sim::kMaxProcesses; ++s) {
      const sim::SimProcessSlot& slot = seg.slots[s];
      const auto st = static_cast<sim::SlotState>(slot.state.load());
      if (st == sim::SlotState::kFree) continue;
      const sim::SimProcessDeviceStats& stats = dev.processes[s];
      ProcessUsage pu;
      pu.slot = s;
      pu.pid = slot.pid;
      pu.live = st == sim::SlotState::kLive;
      pu.command = std::string(slot.command, strnlen(slot.command, sizeof slot.command));
      pu.memory_used = stats.memory_used.load();
      pu.busy_ns = stats.busy_ns.load();
      pu.kernels = stats.kernels.load();
      pu.started_ns = slot.started_ns;
      pu.ended_ns = slot.ended_ns;
      ds.used_memory += pu.memory_used;
      // A process that never touched this device is not listed for it.
      if (pu.memory_used == 0 && pu.busy_ns == 0 && pu.kernels == 0 && stats.contexts.load() == 0) continue;
      ds.processes.push_back(std::move(pu));
    }
    snap.devices.push_back(std::move(ds));
  }
  *out = std::move(snap);
  return true;
}

bool ResetState(const std::string& path, std::string* error) {
  if (access(path.c_str(), F_OK) != 0) return true;
  {
    std::string open_error;
    auto state = sim::SimState::OpenExisting(path, &open_error);
    if (state) {
      state->ReapDeadProcesses();
      for (int s = 0; s < sim::kMaxProcesses; ++s) {
        if (static_cast<sim::SlotState>(state->segment().slots[s].state.load()) == sim::SlotState::kLive) {
          *error = "gpuslice-sim: " + path + " is in use by live process " +
                   std::to_string(state->segment().slots[s].pid) + "; stop it first";
          return false;
        }
      }
    }
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    *error = "gpuslice-sim: cannot remove " + path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool SetDeviceLost(const std::string& path, int ordinal, bool lost, std::string* error) {
  auto state = sim::SimState::OpenExisting(path, error);
  if (!state) return false;
  if (ordinal < 0 || ordinal >= state->device_count()) {
    *error = "gpuslice-sim: no device " + std::to_string(ordinal) + "; the devices are 0 to " +
             std::to_string(state->device_count() - 1);
    return false;
  }
  state->device(ordinal).lost.store(lost ? 1 : 0);
  return true;
}

}  // namespace gpuslice::simquery
