#include "deviceplugin/device_ids.h"

#include "common/quantity.h"

namespace gpuslice::deviceplugin {
namespace {

constexpr std::string_view kSeparator = "::";
constexpr std::string_view kMemoryTag = "mem-";
constexpr std::string_view kComputeTag = "pct-";
constexpr size_t kMaxIdLength = 63;

}  // namespace

std::string FormatUnitId(const std::string& gpu_uuid, UnitKind kind, int index) {
  return gpu_uuid + std::string(kSeparator) + std::string(kind == UnitKind::kMemory ? kMemoryTag : kComputeTag) +
         std::to_string(index);
}

std::optional<UnitId> ParseUnitId(std::string_view id) {
  if (id.size() > kMaxIdLength) return std::nullopt;
  const size_t separator = id.rfind(kSeparator);
  if (separator == std::string_view::npos || separator == 0) return std::nullopt;
  UnitId unit;
  unit.gpu_uuid = std::string(id.substr(0, separator));
  std::string_view rest = id.substr(separator + kSeparator.size());
  if (rest.starts_with(kMemoryTag)) {
    unit.kind = UnitKind::kMemory;
    rest.remove_prefix(kMemoryTag.size());
  } else if (rest.starts_with(kComputeTag)) {
    unit.kind = UnitKind::kCompute;
    rest.remove_prefix(kComputeTag.size());
  } else {
    return std::nullopt;
  }
  const auto index = ParseUnsigned(rest);
  if (!index || *index > 100000 || std::to_string(*index) != rest) return std::nullopt;
  unit.index = static_cast<int>(*index);
  return unit;
}

}  // namespace gpuslice::deviceplugin
