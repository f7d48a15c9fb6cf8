#include "place/inflation.h"

#include <numeric>

#include "place/rng.h"

namespace gpuslice::place {

std::vector<int> InflatedArrivals(const std::vector<Pod>& pods_by_name, int64_t capacity_gpu_milli, double ratio,
                                  uint64_t seed) {
  Rng rng(seed);
  std::vector<int> order(pods_by_name.size());
  std::iota(order.begin(), order.end(), 0);
  rng.Shuffle(order);
  int64_t requested = 0;
  for (const Pod& pod : pods_by_name) requested += pod.TotalGpuMilli();
  const double goal = ratio * static_cast<double>(capacity_gpu_milli);
  if (pods_by_name.empty()) return order;
  if (static_cast<double>(requested) >= goal) {
    const double cut = goal + 0.01 * static_cast<double>(capacity_gpu_milli);
    int64_t sum = 0;
    size_t keep = 0;
    while (keep < order.size() && static_cast<double>(sum) <= cut)
      sum += pods_by_name[static_cast<size_t>(order[keep++])].TotalGpuMilli();
    order.resize(keep);
    return order;
  }
  for (;;) {
    const int pick = static_cast<int>(rng.Below(pods_by_name.size()));
    // The artifact stops at the first draw whose per-GPU share would cross the goal (it compares
    // gpu_milli, not the pod's total); kept so that the arrival sequence matches it.
    if (static_cast<double>(requested + pods_by_name[static_cast<size_t>(pick)].gpu_milli) > goal) break;
    requested += pods_by_name[static_cast<size_t>(pick)].TotalGpuMilli();
    order.push_back(pick);
  }
  return order;
}

}  // namespace gpuslice::place
