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

#include "broker/memory_share.h"
#include "deviceplugin/device_catalog.h"
#include "deviceplugin/plugin_config.h"

namespace gpuslice::deviceplugin {

struct ContainerMount {
  std::string container_path;
  std::string host_path;
  bool read_only = true;
};

// What the container's tenant is guaranteed and may borrow up to on one device.
struct SliceMemory {
  std::string uuid;
  uint64_t device_memory = 0;
  broker::MemoryShare share;
};

struct ContainerEdits {
  std::vector<SliceMemory> memory;  // per device: what Allocate holds as the tenant's request
  std::map<std::string, std::string> envs;
  std::vector<ContainerMount> mounts;
  std::vector<std::string> cdi_devices;
  std::map<std::string, std::string> annotations;
};

// The host file holding the library's container path, mounted at /etc/ld.so.preload in
// PreloadMode::kLdSoPreload (written at start by WriteLdSoPreloadFile).
std::string LdSoPreloadHostPath(const PluginConfig& config);
Status WriteLdSoPreloadFile(const PluginConfig& config);

// The container's answer for the slices `ids`. An error with one line otherwise, its code the
// kind of refusal: InvalidArgument for a list the kubelet does not send (empty, a duplicate, an
// ID that is not this catalog's: the caller's error); Unavailable for a slice of an unhealthy
// device, ResourceExhausted for slices split over devices (well formed, but not one device's
// slice: the line names the request, where its slices are and why that cannot be a slice).
Result<ContainerEdits> EditsForSlices(const DeviceCatalog& catalog, const PluginConfig& config,
                                      const std::vector<std::string>& ids);

}  // namespace gpuslice::deviceplugin
