#include "place/cluster.h"
#include "place/tiers.h"

#include <algorithm>
#include <bit>
#include <map>
#include <tuple>

namespace gpuslice::place {

const char* PodKindName(PodKind kind) {
  static const char* const kNames[kPodKinds] = {"PureCpu", "ShareGpu", "OneGpu", "TwoGpu",
                                                "FourGpu", "EightGpu", "Others"};
  return kNames[static_cast<int>(kind)];
}

int NodeState::GpuLeftTotal() const {
  int total = 0;
  for (int g = 0; g < gpus; ++g) total += gpu_left[static_cast<size_t>(g)];
  return total;
}

int NodeState::FullyFreeGpus() const {
  int free = 0;
  for (int g = 0; g < gpus; ++g) free += gpu_left[static_cast<size_t>(g)] == kMilliPerGpu;
  return free;
}

int NodeState::DistinctAffinities() const {
  int distinct = 0;
  for (int32_t count : affinity) distinct += count > 0;
  return distinct;
}

Cluster BuildCluster(const std::vector<NodeSpec>& specs) {
  Cluster cluster;
  std::map<std::string, int> model_index;
  for (const NodeSpec& spec : specs) {
    NodeState node;
    node.cpu_left = node.cpu_capacity = spec.cpu_milli;
    node.memory_left = spec.memory_mib;
    node.gpus = spec.gpus;
    if (spec.gpus > 0) {
      auto [it, added] = model_index.emplace(spec.model, static_cast<int>(cluster.models.size()));
      if (added) cluster.models.push_back(spec.model);
      node.model = it->second;
    }
    for (int g = 0; g < spec.gpus; ++g) node.gpu_left[static_cast<size_t>(g)] = kMilliPerGpu;
    cluster.total_gpus += spec.gpus;
    cluster.total_gpu_milli += int64_t{spec.gpus} * kMilliPerGpu;
    cluster.nodes.push_back(node);
  }
  return cluster;
}

std::vector<Pod> BuildPods(const std::vector<PodSpec>& specs, const Cluster& cluster, int* score_classes) {
  std::map<std::tuple<int64_t, int, int>, int> classes;
  std::vector<Pod> pods;
  pods.reserve(specs.size());
  for (const PodSpec& spec : specs) {
    Pod pod;
    pod.cpu_milli = spec.cpu_milli;
    pod.memory_mib = spec.memory_mib;
    pod.num_gpu = spec.num_gpu;
    pod.gpu_milli = spec.gpu_milli;
    pod.tier = TierOfQos(spec.qos).value_or(0);  // free unless the trace says paid
    if (!spec.gpu_models.empty()) {
      pod.model_mask = 0;
      for (const std::string& model : spec.gpu_models) {
        for (size_t m = 0; m < cluster.models.size() && m < 64; ++m) {
          if (cluster.models[m] == model) pod.model_mask |= uint64_t{1} << m;
        }
      }
    }
    auto [it, added] =
        classes.emplace(std::make_tuple(pod.cpu_milli, pod.gpu_milli, pod.num_gpu), static_cast<int>(classes.size()));
    pod.score_class = it->second;
    switch (pod.num_gpu) {
      case 0: pod.kind = PodKind::kPureCpu; break;
      case 1: pod.kind = pod.IsFractional() ? PodKind::kShareGpu : PodKind::kOneGpu; break;
      case 2: pod.kind = PodKind::kTwoGpu; break;
      case 4: pod.kind = PodKind::kFourGpu; break;
      case 8: pod.kind = PodKind::kEightGpu; break;
      default: pod.kind = PodKind::kOthers; break;
    }
    pods.push_back(pod);
  }
  if (score_classes) *score_classes = static_cast<int>(classes.size());
  return pods;
}

GpuMask GpusWithRoom(const NodeState& node, int gpu_milli) {
  GpuMask mask = 0;
  for (int g = 0; g < node.gpus; ++g) {
    if (node.gpu_left[static_cast<size_t>(g)] >= gpu_milli) mask |= GpuMask{1} << g;
  }
  return mask;
}

namespace {

// The smallest instance of GPU g that covers `milli` and is free (want_used false) or holds a pod
// (true); -1 if none. Instances are sorted by capacity, so the first match is the smallest.
int MigInstance(const NodeState& node, int g, int milli, bool want_used) {
  for (int i = 0; i < node.mig_instances; ++i) {
    const bool used = (node.mig_used[static_cast<size_t>(g)] >> i) & 1;
    if (used == want_used && node.mig_capacity[static_cast<size_t>(i)] >= milli) return i;
  }
  return -1;
}

// Takes (or gives back) GPU g's instance for a pod of `milli`. Giving back frees the smallest
// held instance that covers the pod: instances of one capacity are interchangeable, and if the
// pod had a larger one, the pod in the freed one fits the larger one as well.
void MigTake(NodeState& node, int g, int milli, bool take) {
  const int i = MigInstance(node, g, milli, !take);
  if (i < 0) return;
  node.mig_used[static_cast<size_t>(g)] ^= static_cast<uint8_t>(1u << i);
  const int16_t capacity = node.mig_capacity[static_cast<size_t>(i)];
  node.gpu_left[static_cast<size_t>(g)] =
      static_cast<int16_t>(node.gpu_left[static_cast<size_t>(g)] + (take ? -capacity : capacity));
}

}  // namespace

GpuMask GpusWithRoom(const NodeState& node, const Pod& pod) {
  if (node.mig ? !(pod.isolated || pod.may_use_mig) : pod.isolated) return 0;
  if (node.mig) {
    GpuMask room = 0;
    for (int g = 0; g < node.gpus; ++g) {
      if (MigInstance(node, g, pod.gpu_milli, false) >= 0) room |= GpuMask{1} << g;
    }
    return room;
  }
  GpuMask room = GpusWithRoom(node, pod.gpu_milli);
  if (!pod.keep_tier_apart) return room;
  for (int g = 0; g < node.gpus; ++g) {
    for (int t = 0; t < kTiers; ++t) {
      if (t != pod.tier && node.tier_pods[static_cast<size_t>(g)][static_cast<size_t>(t)] > 0)
        room &= ~(GpuMask{1} << g);
    }
  }
  return room;
}

bool Fits(const NodeState& node, const Pod& pod) {
  if (pod.cpu_milli > node.cpu_left || pod.memory_mib > node.memory_left) return false;
  if (pod.num_gpu == 0) return true;
  if (node.gpus == 0 || node.model < 0 || !((pod.model_mask >> node.model) & 1)) return false;
  return std::popcount(GpusWithRoom(node, pod)) >= pod.num_gpu;
}

GpuMask FirstFreeGpus(const NodeState& node, int count) {
  GpuMask mask = 0;
  for (int g = 0; g < node.gpus && count > 0; ++g) {
    if (node.gpu_left[static_cast<size_t>(g)] == kMilliPerGpu) {
      mask |= GpuMask{1} << g;
      --count;
    }
  }
  return mask;
}

GpuMask IslandFreeGpus(const NodeState& node, int count, int island_size) {
  int best_island = -1, best_free = 0;
  for (int first = 0; island_size > 0 && first < node.gpus; first += island_size) {
    int free = 0;
    for (int g = first; g < std::min(node.gpus, first + island_size); ++g)
      free += node.gpu_left[static_cast<size_t>(g)] == kMilliPerGpu;
    if (free >= count && (best_island < 0 || free < best_free)) {
      best_island = first;
      best_free = free;
    }
  }
  if (best_island < 0) return FirstFreeGpus(node, count);
  GpuMask mask = 0;
  for (int g = best_island; g < node.gpus && count > 0; ++g) {
    if (node.gpu_left[static_cast<size_t>(g)] == kMilliPerGpu) {
      mask |= GpuMask{1} << g;
      --count;
    }
  }
  return mask;
}

int PairsOnOneIsland(GpuMask gpus, int island_size) {
  int pairs = 0;
  for (int a = 0; a < kMaxGpusPerNode; ++a) {
    for (int b = a + 1; b < kMaxGpusPerNode; ++b) {
      if (((gpus >> a) & 1) && ((gpus >> b) & 1) && a / island_size == b / island_size) ++pairs;
    }
  }
  return pairs;
}

double RelativePairBandwidth(GpuMask gpus, int island_size, double pcie_ratio) {
  const int count = std::popcount(gpus);
  if (count < 2) return 1.0;
  const int pairs = count * (count - 1) / 2;
  const int local = PairsOnOneIsland(gpus, island_size);
  return (local + pcie_ratio * (pairs - local)) / pairs;
}

GpuMask BestFitGpus(const NodeState& node, const Pod& pod) {
  if (pod.num_gpu == 0) return 0;
  if (!pod.IsFractional()) return FirstFreeGpus(node, pod.num_gpu);
  int best = -1;
  const GpuMask room = GpusWithRoom(node, pod);
  for (int g = 0; g < node.gpus; ++g) {
    const int left = node.gpu_left[static_cast<size_t>(g)];
    if (((room >> g) & 1) && (best < 0 || left < node.gpu_left[static_cast<size_t>(best)])) best = g;
  }
  return best < 0 ? 0 : GpuMask{1} << best;
}

void Place(NodeState& node, const Pod& pod, GpuMask gpus) {
  node.cpu_left -= pod.cpu_milli;
  node.memory_left -= pod.memory_mib;
  for (int g = 0; g < node.gpus; ++g) {
    if ((gpus >> g) & 1) {
      if (node.mig) {
        MigTake(node, g, pod.gpu_milli, true);
      } else {
        node.gpu_left[static_cast<size_t>(g)] -= static_cast<int16_t>(pod.gpu_milli);
      }
      ++node.tier_pods[static_cast<size_t>(g)][static_cast<size_t>(pod.tier)];
    }
  }
  if (pod.num_gpu > 0) ++node.affinity[static_cast<size_t>(pod.IsFractional() ? 0 : pod.num_gpu)];
  ++node.version;
}

void Unplace(NodeState& node, const Pod& pod, GpuMask gpus) {
  node.cpu_left += pod.cpu_milli;
  node.memory_left += pod.memory_mib;
  for (int g = 0; g < node.gpus; ++g) {
    if ((gpus >> g) & 1) {
      if (node.mig) {
        MigTake(node, g, pod.gpu_milli, false);
      } else {
        node.gpu_left[static_cast<size_t>(g)] += static_cast<int16_t>(pod.gpu_milli);
      }
      --node.tier_pods[static_cast<size_t>(g)][static_cast<size_t>(pod.tier)];
    }
  }
  if (pod.num_gpu > 0) --node.affinity[static_cast<size_t>(pod.IsFractional() ? 0 : pod.num_gpu)];
  ++node.version;
}

}  // namespace gpuslice::place
