// Device IDs the plugin advertises. Each ID names its device (a GPU or MIG instance, by UUID:
// stable across reboots and device reordering) and one slice of it, so that Allocate can derive
// everything from the IDs the kubelet hands over without knowing which pod they are for:
//   <uuid>::slice-<k>   slice k of the device: 1/slicesPerGpu of its memory and of its time
// A UUID is at most 40 characters ("GPU-" or "MIG-" and 36), so an ID stays within the
// kubelet's 63.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuslice::deviceplugin {

struct SliceId {
  std::string device_uuid;
  int index = 0;
};

std::string FormatSliceId(const std::string& device_uuid, int index);
// nullopt for anything FormatSliceId cannot have written.
std::optional<SliceId> ParseSliceId(std::string_view id);

// The tenant name of the container the kubelet gave `ids`: "k8s-" and 16 hex digits of a hash
// of the sorted IDs. Deterministic, so that the pod-resources API's device IDs for a container
// name its tenant again (the kubelet never hands one ID to two running containers, so two live
// containers' names differ but for a 64-bit hash collision).
std::string TenantNameForIds(std::vector<std::string> ids);

}  // namespace gpuslice::deviceplugin
