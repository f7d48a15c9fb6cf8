// The plugin's configuration: a YAML file (--config) whose keys are listed below, then the
// command-line flags, which override it. Every value is checked at start; a bad one stops the
// plugin with one line naming the key (or flag), the value and what would be valid.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/install_layout.h"
#include "common/pod_names.h"
#include "common/status.h"

namespace gpuslice::deviceplugin {

enum class PreloadMode {
  kEnvironment,  // LD_PRELOAD in the container's environment
  kLdSoPreload,  // /etc/ld.so.preload mounted over, for images whose entrypoint resets the environment
};

struct PluginConfig {
  std::string resource = "gpuslice.io/gpu";                           // resource: the one resource's name
  int slices_per_gpu = 100;                                           // slicesPerGpu: slices per device (divides 100)
  std::vector<std::string> devices;                                   // devices: UUIDs or indices; empty = all
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";         // pluginDir
  std::string host_library = "/var/lib/gpuslice/lib/libgpuslice.so";  // library (on the host)
  std::string container_library = kInstalledLibrary;                  // containerLibrary
  std::string host_state_dir = "/run/gpuslice";                       // stateDir (on the host)
  std::string container_state_dir = "/run/gpuslice";                  // containerStateDir
  std::string nvml_library = "libnvidia-ml.so.1";                     // nvmlLibrary
  int health_interval_ms = 200;                                       // healthIntervalMs
  PreloadMode preload = PreloadMode::kEnvironment;                    // preload: env | ld.so.preload
  std::string cdi_kind;                                               // cdiKind, e.g. nvidia.com/gpu ("" = none)
  // memoryLimit: a slice's memory is its tenant's request (guaranteed); the limit it may borrow up
  // to is that (0, "request") or this percentage of its device, when larger.
  int memory_limit_percent = 0;
  int nvlink_island = 0;  // nvlinkIsland: GPUs per NVLink island by NVML index (0 = none)
  // podResourcesSocket: the kubelet's pod-resources API, read to name each tenant's pod ("" = off)
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  // podsFile: where that map is written (common/pod_names.h): outside stateDir, which every slice
  // mounts read-write, so that no tenant can rename another's pod.
  std::string pods_file = kDefaultPodsFile;
};

// The YAML keys, for the error line and --help.
const std::vector<std::string>& ConfigKeys();

// Reads a YAML file of ConfigKeys() over *config. An error of one line.
Status LoadConfigFile(const std::string& path, PluginConfig* config);

// Sets one key from its text form (the YAML scalar or the flag's value); `source` names where
// it came from in the error line ("--unit-size" or "unitSize in /etc/...").
Status SetConfigValue(const std::string& key, const std::string& value, const std::string& source,
                      PluginConfig* config);

// Checks what a single value cannot show: the paths that must exist on the host.
Status ValidateConfig(const PluginConfig& config);

// The bound on one ListAndWatch answer: the kubelet reads it with gRPC's default 4 MiB limit
// on a received message; a quarter of it leaves room for every field's overhead.
inline constexpr size_t kMaxListBytes = 1u << 20;

}  // namespace gpuslice::deviceplugin
