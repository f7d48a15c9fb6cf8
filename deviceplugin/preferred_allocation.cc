#include "deviceplugin/preferred_allocation.h"

#include <algorithm>
#include <bit>
#include <set>

#include "place/cluster.h"

namespace gpuslice::deviceplugin {
namespace {

using FreeUnits = std::vector<std::vector<std::string>>;  // per catalog position, in unit order

// The node as place/ models one: per GPU the milli-GPU left. A catalog position's free units are
// milli-GPU of the largest GPU (units_per_gpu units = kMilliPerGpu), rounded down: with at most
// 1000 units per GPU (100 compute units; memory units of 1Gi and more) that keeps "has room for
// n units" and "fewer units left" exact, so place's best fit is a best fit in units. Whole GPUs
// listed by an NVML index below 8 sit at their index (NVLink islands are index ranges; a GPU the
// plugin does not serve has no room); otherwise (MIG instances, more than 8 GPUs) positions go
// in groups of place's kMaxGpusPerNode and islands do not apply.
struct NodeModel {
  std::vector<place::NodeState> groups;
  std::vector<std::vector<int>> position;  // [group][gpu]: catalog position, or -1
  int island_size = 0;                     // GPUs per island in a group
  int units_per_gpu = 1;
  bool exact = true;  // units_per_gpu <= kMilliPerGpu

  int16_t Milli(size_t units) const {
    return static_cast<int16_t>(static_cast<int64_t>(units) * place::kMilliPerGpu / units_per_gpu);
  }
  // A request's milli-GPU: rounded down like the GPUs' when exact, up otherwise (never more room
  // than units; a GPU just big enough is then found by the spread).
  int RequestMilli(int units) const {
    const int64_t scaled = int64_t{units} * place::kMilliPerGpu;
    return static_cast<int>(exact ? scaled / units_per_gpu : (scaled + units_per_gpu - 1) / units_per_gpu);
  }
  void SetFree(int p, size_t units) {
    for (size_t g = 0; g < groups.size(); ++g) {
      for (size_t i = 0; i < position[g].size(); ++i) {
        if (position[g][i] == p) groups[g].gpu_left[i] = Milli(units);
      }
    }
  }
};

NodeModel BuildNode(const DeviceCatalog& catalog, const FreeUnits& free, const std::vector<bool>& allowed,
                    int island_size) {
  NodeModel node;
  const auto& gpus = catalog.gpus();
  node.units_per_gpu = catalog.slices_per_gpu();
  node.exact = node.units_per_gpu <= place::kMilliPerGpu;
  const bool by_index = std::all_of(gpus.begin(), gpus.end(), [](const GpuInfo& g) {
    return g.mig_index < 0 && g.index >= 0 && g.index < place::kMaxGpusPerNode;
  });
  auto add_group = [&](int size) {
    node.groups.emplace_back();
    node.groups.back().gpus = size;
    node.groups.back().model = 0;
    node.position.emplace_back(static_cast<size_t>(size), -1);
  };
  if (by_index) {
    int slots = 0;
    for (const GpuInfo& g : gpus) slots = std::max(slots, g.index + 1);
    add_group(slots);
    for (size_t p = 0; p < gpus.size(); ++p) node.position[0][static_cast<size_t>(gpus[p].index)] = static_cast<int>(p);
    node.island_size = island_size > 0 ? island_size : slots;
  } else {
    for (size_t first = 0; first < gpus.size(); first += place::kMaxGpusPerNode) {
      add_group(static_cast<int>(std::min<size_t>(place::kMaxGpusPerNode, gpus.size() - first)));
      for (size_t i = 0; i < static_cast<size_t>(node.groups.back().gpus); ++i)
        node.position.back()[i] = static_cast<int>(first + i);
    }
    node.island_size = place::kMaxGpusPerNode;
  }
  for (size_t p = 0; p < gpus.size(); ++p) node.SetFree(static_cast<int>(p), allowed[p] ? free[p].size() : 0);
  return node;
}

// Place's best fit for a share of `units` in each group, the tightest over all groups (the first
// on ties, as within a group); -1 when no GPU has room.
int BestFitPosition(const NodeModel& node, int units, const FreeUnits& free) {
  place::Pod share;
  share.num_gpu = 1;
  share.gpu_milli = node.RequestMilli(units);
  share.kind = share.IsFractional() ? place::PodKind::kShareGpu : place::PodKind::kOneGpu;
  int best = -1, best_left = 0;
  for (size_t g = 0; g < node.groups.size(); ++g) {
    const place::GpuMask mask = place::BestFitGpus(node.groups[g], share);
    if (mask == 0) continue;
    const int gpu = std::countr_zero(mask);
    const int p = node.position[g][static_cast<size_t>(gpu)];
    const int left = node.groups[g].gpu_left[static_cast<size_t>(gpu)];
    if (p < 0 || static_cast<int>(free[static_cast<size_t>(p)].size()) < units) continue;  // cannot happen: no room
    if (best < 0 || left < best_left) {
      best = p;
      best_left = left;
    }
  }
  return best;
}

// `count` free whole GPUs from one NVLink island (place's IslandFreeGpus): the first group that
// has them on one island, else the first that has them at all; empty when none.
std::vector<int> WholeGpus(const NodeModel& node, int count) {
  std::vector<int> fallback;
  for (size_t g = 0; g < node.groups.size(); ++g) {
    const place::GpuMask mask = place::IslandFreeGpus(node.groups[g], count, node.island_size);
    if (std::popcount(mask) != count) continue;
    std::vector<int> positions;
    for (int gpu = 0; gpu < node.groups[g].gpus; ++gpu) {
      if ((mask >> gpu) & 1) positions.push_back(node.position[g][static_cast<size_t>(gpu)]);
    }
    const int first = std::countr_zero(mask), last = std::bit_width(mask) - 1;
    if (first / node.island_size == last / node.island_size) return positions;
    if (fallback.empty()) fallback = positions;
  }
  return fallback;
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
    return Status::InvalidArgument("allocation_size " + std::to_string(size) + " cannot be met from " +
                                   std::to_string(offered.size()) + " available IDs with " +
                                   std::to_string(required.size()) + " required");
  }
  // Free slices per device position, in slice order.
  FreeUnits free(catalog.gpus().size());
  for (const std::string& id : offered) {
    const int p = catalog.PositionOfSlice(id);
    if (p < 0) {
      return Status::InvalidArgument("unknown device ID '" + id + "'");
    }
    if (!required.contains(id)) free[static_cast<size_t>(p)].push_back(id);
  }
  std::vector<int> required_on(catalog.gpus().size(), 0);
  for (const std::string& id : required) {
    const int p = catalog.PositionOfSlice(id);
    if (p < 0 || !offered.contains(id)) {
      return Status::InvalidArgument("must_include ID '" + id + "' is not one of the available IDs");
    }
    required_on[static_cast<size_t>(p)] += 1;
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
  NodeModel node = BuildNode(catalog, free, allowed, island_size);
  // One device: place's best fit.
  if (size <= per_device) {
    if (const int p = BestFitPosition(node, missing, free); p >= 0) {
      Take(free[static_cast<size_t>(p)], static_cast<size_t>(missing), &chosen);
      return chosen;
    }
  } else if (size % per_device == 0 && required.empty()) {
    // Whole devices, free and on one island.
    const std::vector<int> devices = WholeGpus(node, size / per_device);
    if (!devices.empty()) {
      for (int p : devices) Take(free[static_cast<size_t>(p)], free[static_cast<size_t>(p)].size(), &chosen);
      return chosen;
    }
  }
  size_t most = 0, at = 0;
  for (size_t p = 0; p < free.size(); ++p) {
    const size_t here = allowed[p] ? free[p].size() + static_cast<size_t>(required_on[p]) : 0;
    if (here > most) most = here, at = p;
  }
  return Status::ResourceExhausted(
      std::to_string(size) + " slices fit on no single device here: " +
      (size > per_device && size % per_device != 0
           ? "more than one device's " + std::to_string(per_device) + " slices and not whole devices (a multiple of " +
                 std::to_string(per_device) + ")"
       : size > per_device ? "there are not " + std::to_string(size / per_device) + " wholly free devices"
                           : "the most free on one device is " + std::to_string(most) +
                                 (most > 0 ? " (" + catalog.Describe(at) + ")" : "")) +
      "; a slice's memory and time are on one device");
}

}  // namespace gpuslice::deviceplugin
