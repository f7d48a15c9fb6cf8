#include "deviceplugin/container_allocation.h"

#include <sys/random.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "shim/options.h"

namespace gpuslice::deviceplugin {
namespace {

// "8Gi", "512Mi" or plain bytes: the shortest exact form the shim parses.
std::string Quantity(uint64_t bytes) {
  if (bytes % (1ULL << 30) == 0) return std::to_string(bytes >> 30) + "Gi";
  if (bytes % (1ULL << 20) == 0) return std::to_string(bytes >> 20) + "Mi";
  return std::to_string(bytes);
}

// The shim reads GPUSLICE_* with its option table; a value it would refuse must never reach a
// container (the tenant would fail closed at its first CUDA call, far from the cause).
bool ShimAccepts(const std::map<std::string, std::string>& envs, std::string* error) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : envs) {
    if (name.starts_with("GPUSLICE_")) entries.push_back(name + "=" + value);
  }
  std::vector<char*> environment;
  for (std::string& entry : entries) environment.push_back(entry.data());
  environment.push_back(nullptr);
  shim::ShimOptions options;
  return shim::ParseOptions(environment.data(), &options, error);
}

void AddShim(const PluginConfig& config, const std::string& tenant, ContainerEdits* edits) {
  edits->envs["GPUSLICE_TENANT"] = tenant;
  edits->envs["GPUSLICE_STATE_DIR"] = config.container_state_dir;
  edits->mounts.push_back({config.container_state_dir, config.host_state_dir, false});
  edits->mounts.push_back({config.container_library, config.host_library, true});
  if (config.preload == PreloadMode::kEnvironment) {
    edits->envs["LD_PRELOAD"] = config.container_library;
  } else {
    edits->mounts.push_back({"/etc/ld.so.preload", LdSoPreloadHostPath(config), true});
  }
}

}  // namespace

std::string LdSoPreloadHostPath(const PluginConfig& config) { return config.host_library + ".preload"; }

bool WriteLdSoPreloadFile(const PluginConfig& config, std::string* error) {
  const std::string path = LdSoPreloadHostPath(config);
  const std::string temporary = path + ".tmp";
  std::ofstream out(temporary, std::ios::trunc);
  out << config.container_library << "\n";
  out.close();
  if (!out || std::rename(temporary.c_str(), path.c_str()) != 0) {
    *error = "gpuslice-device-plugin: cannot write " + path + " (preload: ld.so.preload needs the library's directory writable)";
    return false;
  }
  return true;
}

std::string NewTenantName() {
  uint64_t random = 0;
  while (getrandom(&random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) {
  }
  char text[32];
  std::snprintf(text, sizeof text, "k8s-%016llx", static_cast<unsigned long long>(random));
  return text;
}

bool EditsForUnits(const DeviceCatalog& catalog, const PluginConfig& config, UnitKind kind,
                   const std::vector<std::string>& ids, ContainerEdits* edits, std::string* error) {
  if (ids.empty()) {
    *error = "a container request with no device IDs";
    return false;
  }
  std::set<std::string> seen;
  std::vector<int> units_on(catalog.gpus().size(), 0);  // per GPU position
  for (const std::string& id : ids) {
    const int p = catalog.PositionOfUnit(id, kind);
    if (p < 0) {
      *error = "unknown device ID '" + id + "' for " +
               (kind == UnitKind::kMemory ? config.memory_resource : config.compute_resource);
      return false;
    }
    if (!seen.insert(id).second) {
      *error = "device ID '" + id + "' appears twice";
      return false;
    }
    units_on[p] += 1;
  }
  *edits = ContainerEdits{};
  if (kind == UnitKind::kCompute) {
    // The shim's request is one share of each GPU the tenant uses; GetPreferredAllocation keeps
    // the units on one GPU, and units the kubelet spread still add up to the pod's request.
    edits->envs["GPUSLICE_COMPUTE_REQUEST"] = std::to_string(std::min<size_t>(ids.size(), 100));
  } else {
    std::string visible;
    std::vector<size_t> used;
    for (size_t p = 0; p < units_on.size(); ++p) {  // NVML index order = PCI bus order
      if (units_on[p] == 0) continue;
      used.push_back(p);
      visible += (visible.empty() ? "" : ",") + catalog.gpus()[p].uuid;
      if (!config.cdi_kind.empty()) edits->cdi_devices.push_back(config.cdi_kind + "=" + catalog.gpus()[p].uuid);
    }
    edits->envs["NVIDIA_VISIBLE_DEVICES"] = visible;
    if (used.size() == 1) {
      edits->envs["GPUSLICE_MEMORY_LIMIT"] = Quantity(units_on[used[0]] * catalog.unit_bytes());
    } else {
      // The container numbers the GPUs it sees from 0 in PCI bus order (CUDA_DEVICE_ORDER), the
      // order of NVIDIA_VISIBLE_DEVICES above.
      edits->envs["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
      for (size_t n = 0; n < used.size(); ++n)
        edits->envs["GPUSLICE_MEMORY_LIMIT_" + std::to_string(n)] = Quantity(units_on[used[n]] * catalog.unit_bytes());
    }
    AddShim(config, NewTenantName(), edits);
  }
  if (!ShimAccepts(edits->envs, error)) {
    *error = "internal error, the shim would refuse the answer: " + *error;
    return false;
  }
  return true;
}

}  // namespace gpuslice::deviceplugin
