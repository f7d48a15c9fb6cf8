// FGD's workload inflation (the artifact's SortClusterPods + tuneUpPods): the trace's pods,
// sorted by name and shuffled by the seed, then pods drawn from the trace with replacement and
// appended until the requested GPUs reach `ratio` of the cluster's capacity. Pods are never
// deleted. Returns indices into the name-sorted pod list.
//
// A list that asks for more than the goal (a cluster smaller than the trace's) is cut where the
// requested GPUs pass the goal by 1% of capacity: every level up to the goal sees the same
// shuffled pods as if all arrived (the artifact removes pods at random instead, tuneDownPods,
// which draws the same mix), and the run does not place pods nothing measures.
#pragma once

#include <cstdint>
#include <vector>

#include "place/cluster.h"

namespace gpuslice::place {

std::vector<int> InflatedArrivals(const std::vector<Pod>& pods_by_name, int64_t capacity_gpu_milli, double ratio,
                                  uint64_t seed);

}  // namespace gpuslice::place
