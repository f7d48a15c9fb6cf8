// FGD's workload inflation (the artifact's SortClusterPods + tuneUpPods): the trace's pods,
// sorted by name and shuffled by the seed, then pods drawn from the trace with replacement and
// appended until the requested GPUs reach `ratio` of the cluster's capacity. Pods are never
// deleted. Returns indices into the name-sorted pod list.
#pragma once

#include <cstdint>
#include <vector>

#include "place/cluster.h"

namespace gpuslice::place {

std::vector<int> InflatedArrivals(const std::vector<Pod>& pods_by_name, int64_t capacity_gpu_milli, double ratio,
                                  uint64_t seed);

}  // namespace gpuslice::place
