// What gpuslice-dra-driver is told at start (dra/main.cc's flags): its names, where the kubelet
// and the container runtime look for it, and what a prepared container is given.
#pragma once

#include <string>

#include "common/install_layout.h"

namespace gpuslice::dra {

struct DriverConfig {
  std::string driver_name = "gpu.gpuslice.io";  // ResourceSlice spec.driver, DeviceClass selectors
  std::string node_name;                        // this node; also the pool's name
  std::string plugin_dir;    // the DRAPlugin socket and the checkpoint (/var/lib/kubelet/plugins/<driver>)
  std::string registry_dir;  // the kubelet's plugins_registry: the registration socket
  std::string cdi_dir;       // where the container runtime reads CDI specs (/var/run/cdi)
  std::string nvml_library = "libnvidia-ml.so.1";
  // The shim and the broker's state directory: their host paths (CDI mounts' sources) and the
  // paths a container sees them at.
  std::string host_library;
  std::string container_library = kInstalledLibrary;
  std::string host_state_dir;
  std::string container_state_dir = "/var/run/gpuslice";
  // The host path of gpuslice-driver-limits, run by the container runtime as each prepared
  // container's createRuntime and poststop hooks (CDI) to set the driver's memory limits on its
  // cgroup (dra/memory_reservation.h); empty: no hooks, the preload alone enforces memory.
  std::string driver_limits_hook;
  // The effect of the taint on a device with a hard failure (a lost GPU, one that needs a reset,
  // a critical XID; dra/device_health.h): NoSchedule keeps new claims off it, NoExecute also
  // evicts the pods of the claims on it. Other failures are always NoSchedule.
  std::string hard_failure_taint = "NoSchedule";
};

// The CDI kind of the specs the driver writes; a device's CDI ID is "<kind>=<claim uid>-<device>".
inline constexpr char kCdiKind[] = "gpuslice.io/claim";

}  // namespace gpuslice::dra
