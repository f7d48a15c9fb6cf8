#include "deviceplugin/preferred_allocation.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "gpu/gpu_choice.h"

namespace gpuslice::deviceplugin {
namespace {

using FreeUnits = std::vector<std::vector<std::string>>;  // per catalog position, in unit order

// The node as the choice (gpu/gpu_choice.h) sees it: per device slot the free units. Whole GPUs
// sit at their NVML index, so that NVLink islands (index ranges) apply and a GPU the plugin does
// not serve has no room; with MIG instances every catalog position is a slot and islands do not
// apply.
struct NodeModel {
  std::vector<int> free;      // per slot
  std::vector<int> position;  // per slot: the catalog position, or -1
  int island_size = 0;        // devices per island (0: one island)
};

NodeModel BuildNode(const DeviceCatalog& catalog, const FreeUnits& free, const std::vector<bool>& allowed,
                    int island_size) {
  NodeModel node;
  const auto& gpus = catalog.gpus();
  const bool by_index =
      std::all_of(gpus.begin(), gpus.end(), [](const gpu::GpuInfo& g) { return g.mig_index < 0 && g.index >= 0; });
  int slots = by_index ? 0 : static_cast<int>(gpus.size());
  if (by_index) {
    for (const gpu::GpuInfo& g : gpus) slots = std::max(slots, g.index + 1);
    node.island_size = island_size;
  }
  node.free.assign(static_cast<size_t>(slots), 0);
  node.position.assign(static_cast<size_t>(slots), -1);
  for (size_t p = 0; p < gpus.size(); ++p) {
    const size_t slot = by_index ? static_cast<size_t>(gpus[p].index) : p;
    node.position[slot] = static_cast<int>(p);
    node.free[slot] = allowed[p] ? static_cast<int>(free[p].size()) : 0;
  }
  return node;
}

void Take(std::vector<std::string>& from, size_t n, std::vector<std::string>* chosen) {
  chosen->insert(chosen->end(), from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
  from.erase(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace

Result<std::vector<std::string>> PreferSlices(const DeviceCatalog& catalog, const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include, int size, int island_size) {
  std::vector<std::string> chosen;
  const std::set<std::string> required(must_include.begin(), must_include.end());
  std::set<std::string> offered(available.begin(), available.end());
  if (size <= 0 || static_cast<size_t>(size) > offered.size() || required.size() > static_cast<size_t>(size)) {
    return Status::InvalidArgument(
        fmt::format("allocation_size {} cannot be met from {} available IDs with {} required", size, offered.size(),
                    required.size()));
  }
  // Free slices per device position, in slice order.
  FreeUnits free(catalog.gpus().size());
  for (const std::string& id : offered) {
    const Result<size_t> p = catalog.PositionOfSlice(id);
    if (!p.ok()) return Status::InvalidArgument(p.message());
    if (!required.contains(id)) free[*p].push_back(id);
  }
  std::vector<int> required_on(catalog.gpus().size(), 0);
  for (const std::string& id : required) {
    const Result<size_t> p = catalog.PositionOfSlice(id);
    if (!p.ok() || !offered.contains(id)) {
      return Status::InvalidArgument(fmt::format("must_include ID '{}' is not one of the available IDs", id));
    }
    required_on[*p] += 1;
    chosen.push_back(id);
  }
  for (auto& ids : free) {
    std::sort(ids.begin(), ids.end(), [](const std::string& a, const std::string& b) {
      return ParseSliceId(a)->index < ParseSliceId(b)->index;
    });
  }
  const int per_device = catalog.slices_per_gpu();
  const int missing = size - static_cast<int>(required.size());
  if (missing == 0) return chosen;
  // The devices that may take slices: those of the required IDs when there are any (a
  // container's slices stay together), otherwise every device.
  std::vector<bool> allowed(free.size());
  for (size_t p = 0; p < free.size(); ++p) allowed[p] = required.empty() || required_on[p] > 0;
  const NodeModel node = BuildNode(catalog, free, allowed, island_size);
  // One device: the tightest fit.
  if (size <= per_device) {
    if (const std::optional<size_t> slot = gpu::BestFitDevice(node.free, missing)) {
      Take(free[static_cast<size_t>(node.position[*slot])], static_cast<size_t>(missing), &chosen);
      return chosen;
    }
  } else if (size % per_device == 0 && required.empty()) {
    // Whole devices, free and on one island.
    const std::vector<int> slots = gpu::WholeFreeDevices(node.free, per_device, size / per_device, node.island_size);
    for (int slot : slots) {
      auto& ids = free[static_cast<size_t>(node.position[static_cast<size_t>(slot)])];
      Take(ids, ids.size(), &chosen);
    }
    if (!slots.empty()) return chosen;
  }
  size_t most = 0, at = 0;
  for (size_t p = 0; p < free.size(); ++p) {
    const size_t here = allowed[p] ? free[p].size() + static_cast<size_t>(required_on[p]) : 0;
    if (here > most) most = here, at = p;
  }
  const std::string why =
      size > per_device && size % per_device != 0
          ? fmt::format("more than one device's {0} slices and not whole devices (a multiple of {0})", per_device)
      : size > per_device ? fmt::format("there are not {} wholly free devices", size / per_device)
      : most > 0          ? fmt::format("the most free on one device is {} ({})", most, catalog.Describe(at))
                          : "the most free on one device is 0";
  return Status::ResourceExhausted(
      fmt::format("{} slices fit on no single device here: {}; a slice's memory and time are on one device", size,
                  why));
}

}  // namespace gpuslice::deviceplugin
