#include "place/fragmentation.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

namespace gpuslice::place {

TargetWorkload BuildTargetWorkload(const std::vector<PodSpec>& specs, const std::vector<Pod>& pods, double popularity) {
  // Keyed as the artifact's PodResource: the gpu_spec text is part of the class.
  using Key = std::tuple<int64_t, int, int, std::string>;
  std::map<Key, std::pair<int, size_t>> counts;  // count, first pod of the class
  std::map<Key, std::map<int64_t, int>> memories;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string models;
    for (const std::string& m : specs[i].gpu_models) models += (models.empty() ? "" : "|") + m;
    const Key key{specs[i].cpu_milli, specs[i].gpu_milli, specs[i].num_gpu, models};
    auto& entry = counts[key];
    if (entry.first++ == 0) entry.second = i;
    ++memories[key][specs[i].memory_mib];
  }
  std::vector<std::pair<Key, std::pair<int, size_t>>> sorted(counts.begin(), counts.end());
  // Most popular first; ties as the artifact's sort.Reverse(TargetPodList): larger resources first.
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.first != b.second.first) return a.second.first > b.second.first;
    return a.first > b.first;
  });
  TargetWorkload target;
  const double total = static_cast<double>(specs.size());
  double covered = 0;
  for (const auto& [key, entry] : sorted) {
    const Pod& first = pods[entry.second];
    target.all_classes.push_back(TargetClass{first.cpu_milli, first.gpu_milli, first.num_gpu, first.model_mask,
                                             first.memory_mib, static_cast<double>(entry.first) / total});
  }
  for (const auto& [key, entry] : sorted) {
    if (covered >= popularity * total) break;
    const Pod& pod = pods[entry.second];
    const auto& memory_counts = memories.at(key);
    const auto common = std::max_element(memory_counts.begin(), memory_counts.end(),
                                         [](const auto& a, const auto& b) { return a.second < b.second; });
    target.classes.push_back(TargetClass{pod.cpu_milli, pod.gpu_milli, pod.num_gpu, pod.model_mask, common->first,
                                         static_cast<double>(entry.first)});
    covered += entry.first;
  }
  for (TargetClass& c : target.classes) c.weight /= covered;
  return target;
}

double NodeFragmentation(const NodeState& node, const TargetWorkload& target) {
  const int idle = node.GpuLeftTotal();
  if (idle == 0) return 0;
  double fragmented = 0;
  for (const TargetClass& c : target.classes) {
    double amount = idle;
    if (c.gpu_milli > 0 && node.model >= 0 && ((c.model_mask >> node.model) & 1) && c.cpu_milli <= node.cpu_left &&
        (!target.memory_aware || c.memory_mib <= node.memory_left)) {
      int with_room = 0, below = 0;
      for (int g = 0; g < node.gpus; ++g) {
        const int left = node.gpu_left[static_cast<size_t>(g)];
        if (left >= c.gpu_milli) {
          ++with_room;
        } else {
          below += left;
        }
      }
      if (with_room >= c.num_gpu) amount = below;
    }
    fragmented += c.weight * amount;
  }
  return fragmented;
}

}  // namespace gpuslice::place
