#include "common/pod_names.h"

#include <nlohmann/json.hpp>

#include "common/guarded_file.h"
#include "common/printable.h"

namespace gpuslice {
namespace {

constexpr char kWhat[] = "the pods file";
// {"tenants": {"<tenant>": {"namespace": ...}}}: three levels of objects.
constexpr int kMaxDepth = 3;

// Whether arrays and objects nest deeper than `limit` (strings skipped): checked before parsing,
// so that a file of nothing but '[' costs one pass over at most kMaxPodsFileBytes.
bool NestsDeeperThan(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// The string at `key`, "" when absent; false when it is there but not a string within `limit`.
bool Field(const nlohmann::json& pod, const char* key, size_t limit, std::string* out) {
  const auto it = pod.find(key);
  if (it == pod.end()) return true;
  if (!it->is_string() || it->get_ref<const std::string&>().size() > limit) return false;
  *out = it->get<std::string>();
  return true;
}

std::string Problem(const std::string& path, const std::string& why) {
  return std::string(kWhat) + " " + path + " " + why + "; pods are not named";
}

}  // namespace

std::string PodName::Text() const { return Printable(namespace_name + "/" + pod + "/" + container); }

PodNamesRead ParsePodNames(std::string_view text, const std::string& path) {
  PodNamesRead read;
  if (text.size() > kMaxPodsFileBytes) {
    read.problem = Problem(path, "holds more than " + std::to_string(kMaxPodsFileBytes) + " bytes");
    return read;
  }
  if (NestsDeeperThan(text, kMaxDepth)) {
    read.problem = Problem(path, "nests deeper than the device plugin's format ({\"tenants\": {name: {...}}})");
    return read;
  }
  const auto file = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!file.is_object() || !file.contains("tenants") || !file["tenants"].is_object()) {
    read.problem = Problem(path, "is not the device plugin's JSON ({\"tenants\": {name: {...}}})");
    return read;
  }
  size_t ignored = 0;
  for (const auto& [tenant, pod] : file["tenants"].items()) {
    PodName name;
    if (read.names.size() >= kMaxPodsFileTenants || tenant.empty() || tenant.size() > kMaxTenantNameBytes ||
        !pod.is_object() || !Field(pod, "namespace", kMaxNamespaceBytes, &name.namespace_name) ||
        !Field(pod, "pod", kMaxPodNameBytes, &name.pod) ||
        !Field(pod, "container", kMaxContainerNameBytes, &name.container)) {
      ++ignored;
      continue;
    }
    read.names[tenant] = std::move(name);
  }
  if (ignored > 0) {
    read.problem = std::string(kWhat) + " " + path + ": " + std::to_string(ignored) + " of its " +
                   std::to_string(read.names.size() + ignored) + " entries ignored (more than " +
                   std::to_string(kMaxPodsFileTenants) +
                   " tenants, a tenant name over 63 bytes, or a namespace, pod or container name that is not a "
                   "string within Kubernetes' bounds)";
  }
  return read;
}

PodNamesRead ReadPodNames(const std::string& pods_file) {
  Result<std::string> contents = ReadGuardedFile(pods_file, kMaxPodsFileBytes, kWhat);
  if (!contents.ok()) {
    PodNamesRead none;
    if (contents.status().code() != Status::Code::kNotFound) none.problem = contents.message() + "; pods are not named";
    return none;
  }
  return ParsePodNames(*contents, pods_file);
}

}  // namespace gpuslice
