#include "deviceplugin/pod_resources_names.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "common/pod_names.h"
#include "deviceplugin/device_ids.h"

namespace gpuslice::deviceplugin {
namespace {

// Whether `text` is UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF). A name
// that is not cannot be a Kubernetes name, and written as JSON it would come back longer.
bool IsUtf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t length = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (length == 0 || i + length > text.size()) return false;
    uint32_t point = length == 1 ? c : c & (0xff >> (length + 1));
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next >> 6) != 0x2) return false;
      point = (point << 6) | (next & 0x3f);
    }
    static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (point < kSmallest[length] || point > 0x10ffff || (point >= 0xd800 && point <= 0xdfff)) return false;
    i += length;
  }
  return true;
}

// Within the readers' bounds (common/pod_names.h), and text they read back unchanged.
bool Nameable(const std::string& text, size_t limit) { return text.size() <= limit && IsUtf8(text); }

}  // namespace

std::map<std::string, PodOfTenant> TenantPodsOf(const v1::ListPodResourcesResponse& answer, const std::string& resource,
                                                size_t* dropped) {
  std::map<std::string, PodOfTenant> pods;
  for (const auto& pod : answer.pod_resources()) {
    for (const auto& container : pod.containers()) {
      for (const auto& devices : container.devices()) {
        if (devices.resource_name() != resource || devices.device_ids().empty()) continue;
        if (!Nameable(pod.namespace_(), kMaxNamespaceBytes) || !Nameable(pod.name(), kMaxPodNameBytes) ||
            !Nameable(container.name(), kMaxContainerNameBytes)) {
          ++*dropped;
          continue;
        }
        const std::vector<std::string> ids(devices.device_ids().begin(), devices.device_ids().end());
        PodOfTenant entry{pod.namespace_(), pod.name(), container.name(), "", static_cast<int>(ids.size())};
        std::vector<std::string> uuids;
        for (const std::string& id : ids) {
          const auto slice = ParseSliceId(id);
          if (slice && uuids.size() < kMaxListedDevices &&
              std::find(uuids.begin(), uuids.end(), slice->device_uuid) == uuids.end())
            uuids.push_back(slice->device_uuid);
        }
        entry.devices = fmt::format("{}", fmt::join(uuids, ","));
        pods[TenantNameForIds(ids)] = entry;
      }
    }
  }
  return pods;
}

std::string PodsFileText(const std::map<std::string, PodOfTenant>& pods, size_t* dropped) {
  using Json = nlohmann::ordered_json;
  // Each entry as it will be written, so that the file's size is known before it is: entries
  // that would take it past the readers' bound are left out rather than the whole file refused.
  const std::string head = R"({"written_by": "gpuslice-device-plugin", "tenants": {)";
  const std::string tail = "}}\n";
  std::string text = head;
  size_t written = 0;
  for (const auto& [tenant, pod] : pods) {
    const Json value = {{"namespace", pod.namespace_name},
                        {"pod", pod.pod},
                        {"container", pod.container},
                        {"devices", pod.devices},
                        {"slices", pod.slices}};
    const std::string entry = fmt::format("{}\n  {}: {}", written ? "," : "",
                                          Json(tenant).dump(-1, ' ', false, Json::error_handler_t::replace),
                                          value.dump(-1, ' ', false, Json::error_handler_t::replace));
    if (written >= kMaxPodsFileTenants || text.size() + entry.size() + tail.size() + 1 > kMaxPodsFileBytes) {
      ++*dropped;
      continue;
    }
    text += entry;
    ++written;
  }
  return fmt::format("{}{}{}", text, written ? "\n" : "", tail);
}

}  // namespace gpuslice::deviceplugin
