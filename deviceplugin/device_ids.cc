#include "deviceplugin/device_ids.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/quantity.h"

namespace gpuslice::deviceplugin {
namespace {

constexpr std::string_view kSeparator = "::slice-";
constexpr size_t kMaxIdLength = 63;

}  // namespace

std::string FormatSliceId(const std::string& device_uuid, int index) {
  return fmt::format("{}{}{}", device_uuid, kSeparator, index);
}

std::optional<SliceId> ParseSliceId(std::string_view id) {
  if (id.size() > kMaxIdLength) return std::nullopt;
  const size_t separator = id.rfind(kSeparator);
  if (separator == std::string_view::npos || separator == 0) return std::nullopt;
  const std::string_view number = id.substr(separator + kSeparator.size());
  const auto index = ParseUnsigned(number);
  if (!index || *index > 100000 || fmt::to_string(*index) != number) return std::nullopt;
  return SliceId{std::string(id.substr(0, separator)), static_cast<int>(*index)};
}

std::string TenantNameForIds(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  uint64_t hash = 14695981039346656037ULL;  // FNV-1a, 64 bits: stable across builds and hosts
  for (const std::string& id : ids) {
    for (const char c : fmt::format("{},", id)) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ULL;
    }
  }
  return fmt::format("k8s-{:016x}", hash);
}

}  // namespace gpuslice::deviceplugin
