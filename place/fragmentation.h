// FGD's measure of GPU fragmentation (ATC'23 §4; the artifact's NodeGpuShareFragAmount).
// The target workload is the trace's pod classes (cpu, gpu_milli, num_gpu, gpu models) by
// popularity up to 95% of pods, renormalised. A node's fragmentation is the expected idle
// milli-GPU that the next pod, drawn from the target workload, could not use there:
//   CPU-only class or a model it may not use -> all the node's idle GPU;
//   the class fits (CPU and enough GPUs)     -> idle share on GPUs with less left than it asks;
//   otherwise                                -> all the node's idle GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "place/cluster.h"

namespace gpuslice::place {

struct TargetClass {
  int64_t cpu_milli = 0;
  int gpu_milli = 0;
  int num_gpu = 0;
  uint64_t model_mask = ~uint64_t{0};
  int64_t memory_mib = 0;  // the class's most common memory request (used when memory-aware)
  double weight = 0;       // popularity; the classes' weights add up to 1
};

struct TargetWorkload {
  std::vector<TargetClass> classes;
  bool memory_aware = false;  // FGD ignores memory; ours can count it in a class's fit
  // Every class of the pod list, weights adding up to 1: for statistics that the rare classes
  // left out of `classes` matter to (FGD-BF-M's pinned pods: 5% of a list's pods in 60 classes).
  std::vector<TargetClass> all_classes;
};

// popularity: the cumulative share of pods the classes must cover (the artifact: 0.95).
TargetWorkload BuildTargetWorkload(const std::vector<PodSpec>& specs, const std::vector<Pod>& pods, double popularity);

// Expected fragmented milli-GPU on `node` under `target`.
double NodeFragmentation(const NodeState& node, const TargetWorkload& target);

}  // namespace gpuslice::place
