// The device's own figures in `gpuslicectl status`, from NVML: the broker knows only what its
// tenants hold, and memory held by another state directory's tenants or by processes not under
// gpuslice shows only in the device's total in use (broker/unaccounted.h). Whole GPUs only: NVML
// is read as the exporter reads it (gpu/nvml_devices.h), which lists no MIG instances.
// Without NVML the map is empty and status shows what the broker holds.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "broker/snapshot.h"
#include "gpu/nvml_devices.h"

namespace gpuslice::ctl {

// Keyed by UuidKey (ctl/mig_topology.h) of the device's "GPU-..." UUID.
using DeviceFiguresByUuid = std::map<std::string, gpu::DeviceFigures>;

DeviceFiguresByUuid ReadDeviceFigures();

// The device's figures for the broker's GPU, or null.
const gpu::DeviceFigures* DeviceOf(const DeviceFiguresByUuid& devices, const broker::GpuView& gpu);

// What the GPU's tenants in this state directory hold, together.
uint64_t AccountedBytes(const broker::GpuView& gpu);

// The processes whose driver-internal memory the device's figure may hold: NVML's count of its
// compute processes, else this state directory's live processes on it.
uint64_t ProcessesOn(const broker::GpuView& gpu, const gpu::DeviceFigures& device);

// The window of the device's busy figure, as status and top say it: NVML's utilisation is the
// fraction of its last sample period a kernel ran (1/6 s to 1 s, by product; 1 s on the
// simulator); the exporter's gpuslice_device_utilization_ratio is the same figure.
inline constexpr char kBusyWindow[] = "NVML's last sample period (1/6 s to 1 s)";

// "device: GPU 0, NVIDIA H100 80GB HBM3; 13 GiB in use, 3 GiB free; 0% busy in NVML's last
// sample period (1/6 s to 1 s); 2 compute processes".
std::string DeviceLine(const gpu::DeviceFigures& device);

// The program name of the node's process `pid` (the last component of its argv[0], whole up to 64
// bytes; /proc/<pid>/comm without a command line), printable; "?" when unreadable.
std::string ProcessName(unsigned int pid);

// "device processes: 20978 python (3 GiB), 21002 train (2 GiB)": every compute process NVML lists,
// managed or not, with its name from /proc (the node's PID namespace, where NVML's pids are; "?"
// when it cannot be read); "" when there are none.
std::string DeviceProcessesLine(const gpu::DeviceFigures& device);

// "accounted here: 1 GiB of the 13 GiB in use; unaccounted: 12 GiB -- ..." or "...; unaccounted: none".
std::string AccountingLine(const broker::GpuView& gpu, const gpu::DeviceFigures& device);

}  // namespace gpuslice::ctl
