// Allocate's answer for one container, derived from nothing but the device IDs the kubelet
// chose (the API never says which pod they are for; guessing is how HAMi mixed up pods):
//  gpu-memory IDs  -> the GPUs (NVIDIA_VISIBLE_DEVICES, CDI names when configured), the quota
//                     (GPUSLICE_MEMORY_LIMIT, or GPUSLICE_MEMORY_LIMIT_<n> per GPU when the
//                     units are spread), a tenant name of its own, the state directory and the
//                     preloaded libgpuslice.so;
//  gpu-compute IDs -> GPUSLICE_COMPUTE_REQUEST, the number of percent units.
// Every GPUSLICE_* value is checked with the shim's own option parser before it is returned, so
// the plugin never hands a container a variable the shim would refuse.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "deviceplugin/device_catalog.h"
#include "deviceplugin/plugin_config.h"

namespace gpuslice::deviceplugin {

struct ContainerMount {
  std::string container_path;
  std::string host_path;
  bool read_only = true;
};

struct ContainerEdits {
  std::map<std::string, std::string> envs;
  std::vector<ContainerMount> mounts;
  std::vector<std::string> cdi_devices;
  std::map<std::string, std::string> annotations;
};

// The host file holding the library's container path, mounted at /etc/ld.so.preload in
// PreloadMode::kLdSoPreload (written at start by WriteLdSoPreloadFile).
std::string LdSoPreloadHostPath(const PluginConfig& config);
bool WriteLdSoPreloadFile(const PluginConfig& config, std::string* error);

// A fresh tenant name, "k8s-" and 16 random hex digits: unique to one allocation.
std::string NewTenantName();

// False with one line in *error (naming the offending ID) for an empty list, a duplicate or an
// ID that is not this catalog's for `kind`.
bool EditsForUnits(const DeviceCatalog& catalog, const PluginConfig& config, UnitKind kind,
                   const std::vector<std::string>& ids, ContainerEdits* edits, std::string* error);

}  // namespace gpuslice::deviceplugin
