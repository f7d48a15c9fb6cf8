#include "ctl/status_device.h"

#include <fmt/format.h>

#include <fstream>

#include "broker/unaccounted.h"
#include "common/printable.h"
#include "ctl/mig_topology.h"
#include "ctl/units.h"
#include "gpu/nvml_devices.h"

namespace gpuslice::ctl {

DeviceFiguresByUuid ReadDeviceFigures() {
  DeviceFiguresByUuid devices;
  gpu::NvmlDevices nvml;
  // No NVML: status shows what the broker holds.
  if (const auto read = nvml.Read(); read.ok())
    for (const auto& device : *read) devices[UuidKey(device.uuid)] = device;
  return devices;
}

const gpu::DeviceFigures* DeviceOf(const DeviceFiguresByUuid& devices, const broker::GpuView& gpu) {
  const auto it = devices.find(UuidKey(gpu.uuid));
  return it == devices.end() ? nullptr : &it->second;
}

uint64_t AccountedBytes(const broker::GpuView& gpu) {
  uint64_t sum = 0;
  for (const auto& tenant : gpu.tenants) sum += tenant.used;
  return sum;
}

uint64_t ProcessesOn(const broker::GpuView& gpu, const gpu::DeviceFigures& device) {
  if (device.processes) return *device.processes;
  uint64_t count = 0;
  for (const auto& tenant : gpu.tenants) count += tenant.processes.size();
  return count;
}

std::string DeviceLine(const gpu::DeviceFigures& device) {
  const uint64_t free = device.memory_total > device.memory_used ? device.memory_total - device.memory_used : 0;
  std::string line = fmt::format("device: GPU {}, {}; {} in use, {} free", device.index, device.name,
                                 FormatBytes(device.memory_used), FormatBytes(free));
  if (device.utilization_pct) line += fmt::format("; {}% busy in {}", *device.utilization_pct, kBusyWindow);
  if (device.processes)
    line += fmt::format("; {} compute process{}", *device.processes, *device.processes == 1 ? "" : "es");
  return line;
}

std::string ProcessName(unsigned int pid) {
  // The program's own name (argv[0]'s last component): /proc/<pid>/comm keeps only 15 bytes of
  // it ("gpuslice-worklo"). comm for a process without a command line (a kernel thread, a zombie).
  const std::string proc = "/proc/" + std::to_string(pid);
  std::ifstream cmdline(proc + "/cmdline", std::ios::binary);
  std::string name;
  std::getline(cmdline, name, '\0');
  if (const size_t slash = name.rfind('/'); slash != std::string::npos) name.erase(0, slash + 1);
  if (name.empty()) {
    std::ifstream comm(proc + "/comm");
    if (!std::getline(comm, name) || name.empty()) return "?";
  }
  constexpr size_t kLongest = 64;  // a line, not a page: a name rewritten to be huge is cut
  if (name.size() > kLongest) name = name.substr(0, kLongest) + "...";
  return Printable(name);
}

std::string DeviceProcessesLine(const gpu::DeviceFigures& device) {
  constexpr size_t kShown = 8;  // a line, not a page: the rest are counted
  if (device.process_list.empty()) return "";
  std::string line = "device processes:";
  for (size_t i = 0; i < device.process_list.size() && i < kShown; ++i) {
    const auto& process = device.process_list[i];
    // NVML_VALUE_NOT_AVAILABLE (all ones) when the driver cannot say.
    const std::string memory = process.memory_used == ~0ULL ? "?" : FormatBytes(process.memory_used);
    line += fmt::format("{} {} {} ({})", i == 0 ? "" : ",", process.pid, ProcessName(process.pid), memory);
  }
  if (device.process_list.size() > kShown) line += fmt::format(" and {} more", device.process_list.size() - kShown);
  return line;
}

std::string AccountingLine(const broker::GpuView& gpu, const gpu::DeviceFigures& device) {
  const uint64_t accounted = AccountedBytes(gpu);
  const uint64_t unaccounted = broker::UnaccountedBytes(device.memory_used, accounted);
  std::string line = fmt::format("accounted here: {} of the {} in use; unaccounted: ", FormatBytes(accounted),
                                 FormatBytes(device.memory_used));
  if (unaccounted == 0) return line + "none";
  line += FormatBytes(unaccounted);
  const uint64_t processes = ProcessesOn(gpu, device);
  if (!broker::HeldElsewhere(device.memory_used, accounted, processes))
    return line + fmt::format(" (within the {} allowed for the driver-internal memory of {} process{})",
                              FormatBytes(broker::DriverAllowance(processes)), processes, processes == 1 ? "" : "es");
  return line +
         " -- UNACCOUNTED: held by another state directory's tenants or by processes not under gpuslice; "
         "their quotas are not counted here (docs/accounting.md, \"Unaccounted memory\")";
}

}  // namespace gpuslice::ctl
