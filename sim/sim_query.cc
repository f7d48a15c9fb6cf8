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
  // One device or MIG instance: its figures and every process that touched it.
  auto describe = [&](const sim::SimDevice& dev, int ordinal, std::string uuid) {
    DeviceSnapshot ds;
    ds.ordinal = ordinal;
    ds.name = dev.config.name;
    ds.uuid = std::move(uuid);
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
    return ds;
  };
  for (int d = 0; d < state->device_count(); ++d) {
    DeviceSnapshot ds = describe(seg.devices[d], d, sim::FormatGpuUuid(seg.devices[d].config.uuid));
    ds.mig_enabled = state->mig_enabled(d);
    for (int i = 0; i < state->mig_instance_count(); ++i) {
      const sim::SimMigInstance& inst = seg.mig.instances[i];
      if (inst.gpu != d) continue;
      DeviceSnapshot mi = describe(seg.mig.units[i], i, sim::FormatMigUuid(seg.mig.units[i].config.uuid));
      mi.mig_profile = inst.profile;
      mi.mig_start = inst.start;
      mi.gpu_instance_id = inst.gpu_instance_id;
      ds.used_memory += mi.used_memory;
      ds.busy_ns += mi.busy_ns;
      ds.mig_instances.push_back(std::move(mi));
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
