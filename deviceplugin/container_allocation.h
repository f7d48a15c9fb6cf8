// Allocate's answer for one container, derived from nothing but the slice IDs the kubelet chose
// (the API never says which pod they are for; guessing is how HAMi mixed up pods). k slices of
// one device are k/slicesPerGpu of its memory (GPUSLICE_MEMORY_LIMIT) and of its time
// (GPUSLICE_COMPUTE_REQUEST), on that device alone (NVIDIA_VISIBLE_DEVICES, CDI names when
// configured); every slice of several devices is those devices whole. Anything else — slices
// of several devices that are not all of them, an unhealthy device's slice — is refused: a
// container's memory and time are never split over devices. The answer also names a tenant
// derived from the IDs, the state directory and the preloaded libgpuslice.so. Every GPUSLICE_*
// value is checked with the shim's own option parser before it is returned, so the plugin
// never hands a container a variable the shim would refuse.
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
Status WriteLdSoPreloadFile(const PluginConfig& config);

// False with one line in *error for an empty list, a duplicate, an ID that is not this
// catalog's, a slice of an unhealthy device, or slices split over devices (naming the request,
// where its slices are and why that cannot be a slice).
enum class SliceOutcome {
  kOk,
  kMalformed,    // not a list the kubelet sends (empty, duplicate, unknown ID): the caller's error
  kUnplaceable,  // well formed, but not one device's slice (split, or an unhealthy device)
};
SliceOutcome EditsForSlices(const DeviceCatalog& catalog, const PluginConfig& config, const std::vector<std::string>& ids,
                            ContainerEdits* edits, std::string* error);

}  // namespace gpuslice::deviceplugin
