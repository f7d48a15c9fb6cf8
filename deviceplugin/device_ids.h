// Device IDs the plugin advertises. Each ID names its GPU (by UUID, stable across reboots and
// device reordering) and one unit on it, so that Allocate can derive everything from the IDs the
// kubelet hands over, without knowing which pod they are for:
//   <uuid>::mem-<k>   unit k of the GPU's memory (gpuslice.io/gpu-memory)
//   <uuid>::pct-<k>   percent k of the GPU's time (gpuslice.io/gpu-compute)
// A UUID is at most 40 characters ("GPU-" or "MIG-" and 36), so an ID stays within the
// kubelet's 63.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpuslice::deviceplugin {

enum class UnitKind { kMemory, kCompute };

struct UnitId {
  std::string gpu_uuid;
  UnitKind kind = UnitKind::kMemory;
  int index = 0;
};

std::string FormatUnitId(const std::string& gpu_uuid, UnitKind kind, int index);
// nullopt for anything FormatUnitId cannot have written.
std::optional<UnitId> ParseUnitId(std::string_view id);

}  // namespace gpuslice::deviceplugin
