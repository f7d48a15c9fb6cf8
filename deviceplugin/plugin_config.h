// The plugin's configuration: a YAML file (--config) whose keys are listed below, then the
// command-line flags, which override it. Every value is checked at start; a bad one stops the
// plugin with one line naming the key (or flag), the value and what would be valid.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpuslice::deviceplugin {

enum class PreloadMode {
  kEnvironment,  // LD_PRELOAD in the container's environment
  kLdSoPreload,  // /etc/ld.so.preload mounted over, for images whose entrypoint resets the environment
};

struct PluginConfig {
  uint64_t unit_bytes = 1ULL << 30;                         // unitSize: memory per gpu-memory ID
  std::string memory_resource = "gpuslice.io/gpu-memory";  // memoryResource
  std::string compute_resource = "gpuslice.io/gpu-compute";  // computeResource
  std::vector<std::string> devices;                         // devices: UUIDs or indices; empty = all
  std::string plugin_dir = "/var/lib/kubelet/device-plugins";  // pluginDir
  std::string host_library = "/var/lib/gpuslice/lib/libgpuslice.so";  // library (on the host)
  std::string container_library = "/usr/local/gpuslice/lib/libgpuslice.so";  // containerLibrary
  std::string host_state_dir = "/run/gpuslice";             // stateDir (on the host)
  std::string container_state_dir = "/run/gpuslice";        // containerStateDir
  std::string nvml_library = "libnvidia-ml.so.1";           // nvmlLibrary
  int health_interval_ms = 200;                             // healthIntervalMs
  PreloadMode preload = PreloadMode::kEnvironment;          // preload: env | ld.so.preload
  std::string cdi_kind;                                     // cdiKind, e.g. nvidia.com/gpu ("" = none)
  int nvlink_island = 0;  // nvlinkIsland: GPUs per NVLink island by NVML index (0 = none)
};

// The YAML keys, for the error line and --help.
const std::vector<std::string>& ConfigKeys();

// Reads a YAML file of ConfigKeys() over *config. False with one line in *error.
bool LoadConfigFile(const std::string& path, PluginConfig* config, std::string* error);

// Sets one key from its text form (the YAML scalar or the flag's value); `source` names where
// it came from in the error line ("--unit-size" or "unitSize in /etc/...").
bool SetConfigValue(const std::string& key, const std::string& value, const std::string& source,
                    PluginConfig* config, std::string* error);

// Checks what a single value cannot show (paths that must exist, resource names that differ).
bool ValidateConfig(const PluginConfig& config, std::string* error);

}  // namespace gpuslice::deviceplugin
