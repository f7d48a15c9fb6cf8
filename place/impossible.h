// Pods that no node of the cluster could hold even empty (pinned to GPU models the cluster lacks,
// more GPUs than any node has, more CPU or memory than any node with their GPUs has). The artifact counts them as
// failed arrivals; they stay in the arrivals here too, but never in the target workload (a class no node can serve
// would make FGD's measure count every idle GPU as fragmented for it), and the CLI warns once per class of them.
#pragma once

#include <string>
#include <vector>

#include "place/cluster.h"
#include "place/trace.h"

namespace gpuslice::place {

// One shape of impossible pod: its specification's sizes and GPU models alike.
struct ImpossibleClass {
  int count = 0;
  std::string first_pod;  // the first such pod's name, and its line in the list
  int first_line = 0;
  std::string shape;  // "4 GPUs x 1000 milli-GPU, 8 cores, 16384 MiB" ("... milli-GPU of T4|P100, ..." if pinned)
  std::string why;    // "the most GPUs a node of its models has is 2"
};

// Marks (*impossible)[i] for every pod that fits no node of `cluster` (its state before any
// placement) and groups them by shape, in order of first appearance.
std::vector<ImpossibleClass> FindImpossiblePods(const Cluster& cluster, const std::vector<PodSpec>& specs,
                                                const std::vector<Pod>& pods, std::vector<bool>* impossible);

// "gpuslice-place: warning: pods.csv:12: 3 pods (the first openb-pod-0011) ask for ...; ..."
std::string ImpossibleWarning(const std::string& pod_path, const ImpossibleClass& c);

}  // namespace gpuslice::place
