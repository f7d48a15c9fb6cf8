// gpuslice-sim: inspect and reset the simulated GPUs (the query API as a command).
//
//   gpuslice-sim status [--json]   devices, memory, busy time and a table of processes
//   gpuslice-sim reset             remove the state file (refused while a process uses it)
//   gpuslice-sim gpu-lost N [--clear]  mark device N fallen off the bus (NVML: GPU is lost)
//
// Exit codes: 0 success, 1 the state is missing, incompatible or in use, 2 bad usage.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "common/version.h"
#include "gpuslice/sim_query.h"

namespace {

using gpuslice::simquery::DeviceSnapshot;
using gpuslice::simquery::ProcessUsage;
using gpuslice::simquery::Snapshot;

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int Fail(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  return kExitFailure;
}

std::string MiB(uint64_t bytes) { return fmt::format("{}MiB", bytes >> 20); }

// A process's fraction of the device's busy time (0 when the device never ran a kernel).
double Share(const ProcessUsage& p, const DeviceSnapshot& d) {
  return d.busy_ns == 0 ? 0.0 : static_cast<double>(p.busy_ns) / static_cast<double>(d.busy_ns);
}

std::string RunningText(const DeviceSnapshot& d) {
  if (d.running_slot < 0) return "idle";
  for (const auto& p : d.processes) {
    if (p.slot == d.running_slot) return fmt::format("slot {} (pid {})", p.slot, p.pid);
  }
  return fmt::format("slot {}", d.running_slot);
}

// One device, or one MIG instance of it (`title` says which).
void PrintUnit(const DeviceSnapshot& d, const std::string& title) {
  {
    fmt::print("\n{}  {}  {}\n", title, d.name, d.uuid);
    fmt::print("  memory {} / {}   busy {:.1f} ms   hand-overs {}   time slice {:.1f} ms   running: {}\n",
               MiB(d.used_memory), MiB(d.total_memory), d.busy_ns / 1e6, d.handovers, d.timeslice_ns / 1e6,
               RunningText(d));
    fmt::print("  compute capability {}.{}, {} SMs\n", d.cc_major, d.cc_minor, d.sm_count);
    if (d.processes.empty()) {
      fmt::print("  no processes\n");
      return;
    }
    fmt::print("  {:>4}  {:>8}  {:<6}  {:<16}  {:>10}  {:>11}  {:>9}  {:>6}\n", "SLOT", "PID", "STATE", "COMMAND",
               "MEMORY", "BUSY ms", "KERNELS", "SHARE");
    for (const ProcessUsage& p : d.processes) {
      fmt::print("  {:>4}  {:>8}  {:<6}  {:<16}  {:>10}  {:>11.1f}  {:>9}  {:>5.1f}%\n", p.slot, p.pid,
                 p.live ? "live" : "exited", p.command.substr(0, 16), MiB(p.memory_used), p.busy_ns / 1e6, p.kernels,
                 100.0 * Share(p, d));
    }
  }
}

void PrintText(const Snapshot& snap) {
  fmt::print("Simulated GPUs in {}\n", snap.state_path);
  for (const DeviceSnapshot& d : snap.devices) {
    PrintUnit(d, fmt::format("GPU {}{}", d.ordinal, d.mig_enabled ? "  (MIG mode)" : ""));
    for (const DeviceSnapshot& m : d.mig_instances)
      PrintUnit(m, fmt::format("  GPU {} MIG {} (GI {}, slices from {})", d.ordinal, m.mig_profile, m.gpu_instance_id,
                               m.mig_start));
  }
}

// Field names follow gpuslice/sim_query.h; "share" is the process's fraction of device busy time.
nlohmann::json UnitJson(const DeviceSnapshot& d) {
  {
    nlohmann::json processes = nlohmann::json::array();
    for (const ProcessUsage& p : d.processes) {
      processes.push_back({{"slot", p.slot},
                           {"pid", p.pid},
                           {"live", p.live},
                           {"command", p.command},
                           {"memory_used", p.memory_used},
                           {"busy_ns", p.busy_ns},
                           {"kernels", p.kernels},
                           {"share", Share(p, d)},
                           {"started_ns", p.started_ns},
                           {"ended_ns", p.ended_ns}});
    }
    nlohmann::json unit = {{"ordinal", d.ordinal},
                           {"name", d.name},
                           {"uuid", d.uuid},
                           {"total_memory", d.total_memory},
                           {"used_memory", d.used_memory},
                           {"free_memory", d.total_memory - std::min(d.used_memory, d.total_memory)},
                           {"busy_ns", d.busy_ns},
                           {"handovers", d.handovers},
                           {"timeslice_ns", d.timeslice_ns},
                           {"sm_count", d.sm_count},
                           {"cc_major", d.cc_major},
                           {"cc_minor", d.cc_minor},
                           {"running_slot", d.running_slot},
                           {"processes", std::move(processes)}};
    if (!d.mig_profile.empty()) {  // a MIG instance
      unit["mig_profile"] = d.mig_profile;
      unit["gpu_instance_id"] = d.gpu_instance_id;
      unit["mig_start"] = d.mig_start;
    } else {
      unit["mig_enabled"] = d.mig_enabled;
      nlohmann::json instances = nlohmann::json::array();
      for (const DeviceSnapshot& m : d.mig_instances) instances.push_back(UnitJson(m));
      unit["mig_instances"] = std::move(instances);
    }
    return unit;
  }
}

nlohmann::json ToJson(const Snapshot& snap) {
  nlohmann::json devices = nlohmann::json::array();
  for (const DeviceSnapshot& d : snap.devices) devices.push_back(UnitJson(d));
  return {{"state_path", snap.state_path}, {"taken_ns", snap.taken_ns}, {"devices", std::move(devices)}};
}

int Status(const std::string& path, bool json) {
  if (access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
    return Fail("gpuslice-sim: no simulated GPU state at " + path +
                ": no process has used the simulated driver since it was created or reset");
  }
  Snapshot snap;
  std::string error;
  if (!gpuslice::simquery::TakeSnapshot(path, &snap, &error)) return Fail(error);
  if (json) {
    fmt::print("{}\n", ToJson(snap).dump(2));
  } else {
    PrintText(snap);
  }
  return 0;
}

int Reset(const std::string& path) {
  const bool existed = access(path.c_str(), F_OK) == 0;
  std::string error;
  if (!gpuslice::simquery::ResetState(path, &error)) return Fail(error);
  if (existed) {
    fmt::print("gpuslice-sim: removed {}; the next process creates the devices anew\n", path);
  } else {
    fmt::print("gpuslice-sim: nothing to reset, {} does not exist\n", path);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Inspect and reset the simulated GPUs that the simulated libcuda.so.1 and libnvidia-ml.so.1 share.",
               "gpuslice-sim"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpuslice-sim " GPUSLICE_VERSION, "Print the version and exit");
  app.fallthrough();  // --state is accepted after the subcommand too
  std::string state_path = gpuslice::simquery::StatePath();
  app.add_option("--state", state_path, "the state file (default: $GPUSLICE_SIM_STATE, else /dev/shm/gpuslice-sim)")
      ->capture_default_str();
  app.footer(
      "The simulated GPUs are one state file. Every process that uses the simulated driver registers\n"
      "in it; its device busy time, kernel count and memory there are the ground truth that shares\n"
      "are measured against.\n"
      "\n"
      "status prints, per device, its name, UUID, memory used/total, busy time (time some kernel\n"
      "occupied it), hand-overs between processes and the process running now, then one row per\n"
      "process that used it: slot, pid, live/exited, command, memory held, busy ms, kernels and its\n"
      "share of the device's busy time. --json prints the same as one JSON document.\n"
      "\n"
      "reset removes the state file, so that the next process creates the devices anew from the\n"
      "GPUSLICE_SIM_* variables; it is refused while a live process uses the simulated GPUs.\n"
      "\n"
      "Exit status: 0 on success; 1 when the state file is missing or incompatible with this build,\n"
      "or (reset) still used by a live process; 2 on a usage error.");

  bool json = false;
  CLI::App* status = app.add_subcommand("status", "show devices, memory, busy time and processes");
  status->add_flag("--json", json, "print one JSON document (fields as in gpuslice/sim_query.h, plus share)");
  CLI::App* reset = app.add_subcommand("reset", "remove the state file (refused while a live process uses it)");
  int lost_ordinal = 0;
  bool clear_lost = false;
  CLI::App* gpu_lost =
      app.add_subcommand("gpu-lost", "mark a device fallen off the bus: the simulated NVML answers GPU_IS_LOST for it");
  gpu_lost->add_option("ordinal", lost_ordinal, "the device")->required();
  gpu_lost->add_flag("--clear", clear_lost, "mark it present again");
  status->footer("");  // the top-level help explains both
  reset->footer("");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  try {
    if (status->parsed()) return Status(state_path, json);
    if (reset->parsed()) return Reset(state_path);
    if (gpu_lost->parsed()) {
      std::string error;
      if (!gpuslice::simquery::SetDeviceLost(state_path, lost_ordinal, !clear_lost, &error)) return Fail(error);
      fmt::print("gpuslice-sim: device {} is {}\n", lost_ordinal, clear_lost ? "present again" : "lost");
      return 0;
    }
  } catch (const std::exception& e) {
    return Fail(std::string("gpuslice-sim: ") + e.what());
  }
  return kExitUsage;
}
