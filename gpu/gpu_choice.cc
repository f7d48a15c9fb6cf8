#include "gpu/gpu_choice.h"

#include <algorithm>

namespace gpuslice::gpu {

std::optional<size_t> BestFitDevice(std::span<const int> free, int units) {
  std::optional<size_t> best;
  for (size_t d = 0; d < free.size(); ++d) {
    if (free[d] >= units && (!best || free[d] < free[*best])) best = d;
  }
  return best;
}

namespace {

// The first `count` wholly free devices in [first, last).
std::vector<int> FirstWhollyFree(std::span<const int> free, int whole, int count, size_t first, size_t last) {
  std::vector<int> chosen;
  for (size_t d = first; d < last && static_cast<int>(chosen.size()) < count; ++d) {
    if (free[d] == whole) chosen.push_back(static_cast<int>(d));
  }
  return chosen;
}

}  // namespace

std::vector<int> WholeFreeDevices(std::span<const int> free, int whole, int count, int island_size) {
  const size_t size = island_size > 0 ? static_cast<size_t>(island_size) : std::max<size_t>(free.size(), 1);
  size_t best_island = free.size();
  long best_free = 0;
  for (size_t first = 0; first < free.size(); first += size) {
    const size_t last = std::min(free.size(), first + size);
    const long here =
        std::count(free.begin() + static_cast<long>(first), free.begin() + static_cast<long>(last), whole);
    if (here >= count && (best_island == free.size() || here < best_free)) {
      best_island = first;
      best_free = here;
    }
  }
  std::vector<int> chosen = best_island < free.size() ? FirstWhollyFree(free, whole, count, best_island,
                                                                        std::min(free.size(), best_island + size))
                                                      : FirstWhollyFree(free, whole, count, 0, free.size());
  if (static_cast<int>(chosen.size()) < count) chosen.clear();
  return chosen;
}

}  // namespace gpuslice::gpu
