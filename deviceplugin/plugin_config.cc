#include "deviceplugin/plugin_config.h"

#include <sys/stat.h>

#include <functional>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "common/quantity.h"

namespace gpuslice::deviceplugin {
namespace {

using Setter = std::function<bool(const std::string& value, PluginConfig* config)>;

struct KeySpec {
  const char* key;
  const char* expected;  // what a valid value is, for the error line
  Setter set;
};

bool AbsolutePath(const std::string& value) { return !value.empty() && value[0] == '/'; }

// A resource name the kubelet accepts for an extended resource: <domain>/<name>.
bool ResourceName(const std::string& value) {
  const size_t slash = value.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == value.size() || value.size() > 63 + 254) return false;
  if (value.find('/', slash + 1) != std::string::npos) return false;
  if (value.substr(0, slash).find('.') == std::string::npos) return false;  // a domain, not a bare word
  for (char c : value) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '/' || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::vector<std::string> SplitList(const std::string& value) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = value.find(',', start);
    const std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

const std::vector<KeySpec>& KeyTable() {
  static const std::vector<KeySpec> kTable = {
      {"resource", "<domain>/<name> in lower case, e.g. gpuslice.io/gpu",
       [](const std::string& v, PluginConfig* c) { return ResourceName(v) && (c->resource = v, true); }},
      // A slice's share of the device's time must be a whole percentage (the shim's
      // GPUSLICE_COMPUTE_REQUEST is one), so that the slices of a device add up to exactly 100%.
      {"slicesPerGpu", "a divisor of 100: 1, 2, 4, 5, 10, 20, 25, 50 or 100",
       [](const std::string& v, PluginConfig* c) {
         const auto n = ParseUnsigned(v);
         if (!n || *n == 0 || *n > 100 || 100 % *n != 0) return false;
         c->slices_per_gpu = static_cast<int>(*n);
         return true;
       }},
      {"devices", "'all' or GPU UUIDs, NVML indices or MIG instance UUIDs, e.g. [0, 1] or GPU-8f6c...",
       [](const std::string& v, PluginConfig* c) {
         c->devices = v == "all" ? std::vector<std::string>{} : SplitList(v);
         return v == "all" || !c->devices.empty();
       }},
      {"pluginDir", "an absolute directory, e.g. /var/lib/kubelet/device-plugins",
       [](const std::string& v, PluginConfig* c) { return AbsolutePath(v) && (c->plugin_dir = v, true); }},
      {"library", "the absolute path of libgpuslice.so on the host, e.g. /var/lib/gpuslice/lib/libgpuslice.so",
       [](const std::string& v, PluginConfig* c) { return AbsolutePath(v) && (c->host_library = v, true); }},
      {"containerLibrary", "an absolute path inside containers, e.g. /usr/local/lib/gpuslice/libgpuslice.so",
       [](const std::string& v, PluginConfig* c) { return AbsolutePath(v) && (c->container_library = v, true); }},
      {"stateDir", "the absolute path of gpuslice's state directory on the host, e.g. /run/gpuslice",
       [](const std::string& v, PluginConfig* c) { return AbsolutePath(v) && (c->host_state_dir = v, true); }},
      {"containerStateDir", "an absolute path inside containers, e.g. /run/gpuslice",
       [](const std::string& v, PluginConfig* c) { return AbsolutePath(v) && (c->container_state_dir = v, true); }},
      {"nvmlLibrary", "a library name or path, e.g. libnvidia-ml.so.1",
       [](const std::string& v, PluginConfig* c) { return !v.empty() && (c->nvml_library = v, true); }},
      {"healthIntervalMs", "milliseconds from 10 to 1000, e.g. 200",
       [](const std::string& v, PluginConfig* c) {
         const auto ms = ParseUnsigned(v);
         if (!ms || *ms < 10 || *ms > 1000) return false;
         c->health_interval_ms = static_cast<int>(*ms);
         return true;
       }},
      {"preload", "env or ld.so.preload",
       [](const std::string& v, PluginConfig* c) {
         if (v == "env") c->preload = PreloadMode::kEnvironment;
         else if (v == "ld.so.preload") c->preload = PreloadMode::kLdSoPreload;
         else return false;
         return true;
       }},
      {"cdiKind", "a CDI kind such as nvidia.com/gpu, or empty for none",
       [](const std::string& v, PluginConfig* c) { return (v.empty() || ResourceName(v)) && (c->cdi_kind = v, true); }},
      // NVML does not say how NVLink groups the GPUs in a way the plugin reads (nvidia-smi topo -m
      // does): the operator names the island size, and islands are consecutive NVML indices.
      {"nvlinkIsland", "0 (no NVLink islands), 2, 4 or 8: GPUs per island, consecutive NVML indices",
       [](const std::string& v, PluginConfig* c) {
         const auto n = ParseUnsigned(v);
         if (!n || (*n != 0 && *n != 2 && *n != 4 && *n != 8)) return false;
         c->nvlink_island = static_cast<int>(*n);
         return true;
       }},
      {"memoryLimit", "request (no borrowing) or a percentage of the device from 1% to 100%, e.g. 100%",
       [](const std::string& v, PluginConfig* c) {
         if (v == "request") return (c->memory_limit_percent = 0, true);
         const auto n = v.ends_with("%") ? ParseUnsigned(v.substr(0, v.size() - 1)) : std::nullopt;
         if (!n || *n < 1 || *n > 100) return false;
         c->memory_limit_percent = static_cast<int>(*n);
         return true;
       }},
      {"podResourcesSocket", "the absolute path of the kubelet's pod-resources socket, or empty for none",
       [](const std::string& v, PluginConfig* c) {
         return (v.empty() || AbsolutePath(v)) && (c->pod_resources_socket = v, true);
       }},
      {"podsFile",
       "the absolute path of the tenants' pod names file, outside stateDir, e.g. /run/gpuslice-pods/pods.json",
       [](const std::string& v, PluginConfig* c) { return AbsolutePath(v) && (c->pods_file = v, true); }},
  };
  return kTable;
}

// Keys of the two-resource plugin (gpu-memory and gpu-compute), which could put a pod's memory
// on one GPU and its compute on another: refused with what replaced them, never ignored.
const char* RemovedKey(const std::string& key) {
  if (key == "unitSize")
    return "a unit is now 1/slicesPerGpu of one GPU's memory and time together (slicesPerGpu: 100 by default)";
  if (key == "memoryResource" || key == "computeResource")
    return "memory and compute are now one resource, so that a pod's memory and time are on one GPU: "
           "name it with resource (default gpuslice.io/gpu)";
  return nullptr;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

const std::vector<std::string>& ConfigKeys() {
  static const std::vector<std::string> kKeys = [] {
    std::vector<std::string> keys;
    for (const KeySpec& spec : KeyTable()) keys.push_back(spec.key);
    return keys;
  }();
  return kKeys;
}

Status SetConfigValue(const std::string& key, const std::string& value, const std::string& source,
                      PluginConfig* config) {
  if (const char* instead = RemovedKey(key)) {
    return Status::Error(
        fmt::format("gpuslice-device-plugin: {} is no longer a key: {} (docs/kubernetes.md)", source, instead));
  }
  for (const KeySpec& spec : KeyTable()) {
    if (key != spec.key) continue;
    if (spec.set(value, config)) return Status::Ok();
    return Status::Error(
        fmt::format("gpuslice-device-plugin: invalid {} '{}'; expected {}", source, value, spec.expected));
  }
  return Status::Error(
      fmt::format("gpuslice-device-plugin: unknown {}; the keys are {}", source, fmt::join(ConfigKeys(), ", ")));
}

Status LoadConfigFile(const std::string& path, PluginConfig* config) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return Status::Error(fmt::format("gpuslice-device-plugin: cannot read the config file {}", path));
  } catch (const YAML::Exception& e) {
    return Status::Error(fmt::format("gpuslice-device-plugin: {} is not valid YAML: {}", path, e.what()));
  }
  if (root.IsNull()) return Status::Ok();  // an empty file: every default
  if (!root.IsMap()) {
    return Status::Error(
        fmt::format("gpuslice-device-plugin: {} must be a YAML mapping of keys such as unitSize: 1Gi", path));
  }
  std::map<std::string, int> seen;
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    const std::string source = fmt::format("{} in {}", key, path);
    // YAML forbids a key twice in one mapping; yaml-cpp keeps both and a lookup finds one of
    // them, so an operator's edit further down could be silently ignored (or silently win).
    if (seen[key]++ > 0) {
      return Status::Error(fmt::format("gpuslice-device-plugin: {} appears twice; keep one", source));
    }
    std::string value;
    if (entry.second.IsSequence()) {
      std::vector<std::string> items;
      for (const auto& item : entry.second) {
        if (!item.IsScalar()) return SetConfigValue(key, "", source, config);
        items.push_back(item.as<std::string>());
      }
      value = fmt::format("{}", fmt::join(items, ","));
      if (value.empty()) value = ",";  // an empty list names no device: refused below
    } else if (entry.second.IsScalar()) {
      value = entry.second.as<std::string>();
    } else if (!entry.second.IsNull()) {
      return SetConfigValue(key, "<mapping>", source, config);
    }
    if (Status s = SetConfigValue(key, value, source, config); !s.ok()) return s;
  }
  return Status::Ok();
}

Status ValidateConfig(const PluginConfig& config) {
  if (!FileExists(config.host_library)) {
    return Status::Error(fmt::format(
        "gpuslice-device-plugin: library '{}' does not exist; copy libgpuslice.so to the host there (the DaemonSet's init container does) or set library to where it is",
        config.host_library));
  }
  if (!IsDirectory(config.plugin_dir)) {
    return Status::Error(fmt::format(
        "gpuslice-device-plugin: pluginDir '{}' is not a directory; mount the kubelet's /var/lib/kubelet/device-plugins there",
        config.plugin_dir));
  }
  // Every slice mounts it; a missing one would make each container's start fail far from here.
  if (!IsDirectory(config.host_state_dir)) {
    return Status::Error(fmt::format(
        "gpuslice-device-plugin: stateDir '{}' is not a directory; create it on the host (mkdir -m 0770) and mount it into the plugin's container",
        config.host_state_dir));
  }
  // Tenants write the state directory: a pods file there could be rewritten by any of them.
  const std::string state_dir = config.host_state_dir.back() == '/' ? config.host_state_dir
                                                                    : fmt::format("{}/", config.host_state_dir);
  if (config.pods_file.starts_with(state_dir)) {
    return Status::Error(fmt::format(
        "gpuslice-device-plugin: podsFile '{}' is inside stateDir '{}', which every tenant can write; name a file of a directory only the plugin writes, e.g. {}",
        config.pods_file, config.host_state_dir, kDefaultPodsFile));
  }
  return Status::Ok();
}

}  // namespace gpuslice::deviceplugin
