#include "deviceplugin/container_allocation.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/replace_file.h"
#include "shim/option_values.h"

namespace gpuslice::deviceplugin {
namespace {

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

std::string LdSoPreloadHostPath(const PluginConfig& config) { return fmt::format("{}.preload", config.host_library); }

Status WriteLdSoPreloadFile(const PluginConfig& config) {
  const std::string path = LdSoPreloadHostPath(config);
  if (Status written = ReplaceFile(path, fmt::format("{}\n", config.container_library)); !written.ok()) {
    return Status::Error(fmt::format(
        "gpuslice-device-plugin: cannot write {}: {} (preload: ld.so.preload needs the library's directory writable)",
        path, written.message()));
  }
  return Status::Ok();
}

namespace {

// "40 gpuslice.io/gpu slices (40% of one GPU's memory and time)".
std::string RequestText(const DeviceCatalog& catalog, const PluginConfig& config, size_t slices) {
  return fmt::format("{} {} slices ({}% of one GPU's memory and time)", slices, config.resource,
                     slices * static_cast<size_t>(catalog.PercentPerSlice()));
}

}  // namespace

Result<ContainerEdits> EditsForSlices(const DeviceCatalog& catalog, const PluginConfig& config,
                                      const std::vector<std::string>& ids) {
  if (ids.empty()) return Status::InvalidArgument("a container request with no device IDs");
  const DeviceCatalog::HealthView health = catalog.Health();
  std::set<std::string> seen;
  std::vector<size_t> slices_on(catalog.gpus().size(), 0);  // per device position
  for (const std::string& id : ids) {
    const Result<size_t> p = catalog.PositionOfSlice(id);
    if (!p.ok()) return Status::InvalidArgument(fmt::format("{} for {}", p.message(), config.resource));
    if (!seen.insert(id).second) return Status::InvalidArgument(fmt::format("device ID '{}' appears twice", id));
    if (!health.healthy[*p]) {
      return Status::Unavailable(fmt::format(
          "device ID '{}' is a slice of {}, which is Unhealthy (NVML does not answer for it); the kubelet must not allocate it",
          id, catalog.Describe(*p)));
    }
    slices_on[*p] += 1;
  }
  std::vector<size_t> used;  // NVML index order = PCI bus order
  for (size_t p = 0; p < slices_on.size(); ++p) {
    if (slices_on[p] > 0) used.push_back(p);
  }
  const size_t whole = static_cast<size_t>(catalog.slices_per_gpu());
  const bool all_whole = std::all_of(used.begin(), used.end(), [&](size_t p) { return slices_on[p] == whole; });
  if (used.size() > 1 && !all_whole) {
    std::vector<std::string> where;
    for (size_t p : used) where.push_back(fmt::format("{}: {}", catalog.Describe(p), slices_on[p]));
    return Status::ResourceExhausted(fmt::format(
        "{} were given on {} devices ({}); a slice's memory and time must be on one device (or every slice of each device, for whole devices): no single device had that many free, or the kubelet did not take the plugin's preferred allocation. Ask for at most {} slices, or a multiple of it for whole devices",
        RequestText(catalog, config, ids.size()), used.size(), fmt::join(where, ", "), whole));
  }
  ContainerEdits answer;
  std::vector<std::string> visible;
  for (size_t p : used) {
    visible.push_back(catalog.gpus()[p].uuid);
    if (!config.cdi_kind.empty())
      answer.cdi_devices.push_back(fmt::format("{}={}", config.cdi_kind, catalog.gpus()[p].uuid));
  }
  answer.envs["NVIDIA_VISIBLE_DEVICES"] = fmt::format("{}", fmt::join(visible, ","));
  for (size_t p : used) {
    const uint64_t device_memory = catalog.gpus()[p].total_memory;
    const uint64_t request = slices_on[p] == whole ? device_memory : slices_on[p] * catalog.SliceBytes(p);
    // As the shim reads a percentage (shim/options.cc): exact, so that the announced limit and
    // the container's own agree (a ledger refuses a second, different share).
    const uint64_t ceiling = static_cast<uint64_t>(static_cast<unsigned __int128>(device_memory) *
                                                   static_cast<uint64_t>(config.memory_limit_percent) / 100);
    answer.memory.push_back({catalog.gpus()[p].uuid, device_memory, {request, std::max(request, ceiling)}});
  }
  if (used.size() == 1) {
    const size_t p = used[0];
    // The slices' memory is guaranteed (the request); memoryLimit, when larger, is what the
    // tenant may borrow up to (docs/accounting.md, "Requests and limits").
    const broker::MemoryShare& share = answer.memory[0].share;
    answer.envs["GPUSLICE_MEMORY_REQUEST"] = slices_on[p] == whole ? "100%" : shim::QuotaText(share.request);
    answer.envs["GPUSLICE_MEMORY_LIMIT"] = slices_on[p] == whole ? "100%" : shim::QuotaText(share.limit);
    answer.envs["GPUSLICE_COMPUTE_REQUEST"] =
        fmt::to_string(slices_on[p] * static_cast<size_t>(catalog.PercentPerSlice()));
  } else {
    // Whole devices: all of each one's memory and time. The container numbers the devices it
    // sees from 0 in PCI bus order (CUDA_DEVICE_ORDER), the order of NVIDIA_VISIBLE_DEVICES.
    answer.envs["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
    answer.envs["GPUSLICE_MEMORY_REQUEST"] = "100%";
    answer.envs["GPUSLICE_MEMORY_LIMIT"] = "100%";
    answer.envs["GPUSLICE_COMPUTE_REQUEST"] = "100";
  }
  AddShim(config, TenantNameForIds(ids), &answer);
  if (const Status accepted = shim::ShimAccepts(answer.envs); !accepted.ok()) {
    return Status::InvalidArgument(
        fmt::format("internal error, the shim would refuse the answer: {}", accepted.message()));
  }
  return answer;
}

}  // namespace gpuslice::deviceplugin
