// Homes the pods still to come will need. A home of a pod class is room on a node for one more
// pod of the class (model, GPUs with room, cores, memory). A placement that takes a node's room
// takes homes from the classes that fitted there; that costs nothing while a class has far more
// homes than pods to come, and the class's GPUs when it has too few: the pod that finds no home
// fails, and its GPUs stay idle. The value of a class's homes is the chance that its last home
// will be wanted: P(N >= H), N ~ Poisson(pods of the class expected before the cluster is full,
// in GPUs or in cores), H its homes now. FGD-BF-G counts the multi-GPU classes: few nodes hold
// one whole, and FGD's measure, which weighs classes by how many pods they have, sees them least.
// It holds on any cluster, whatever its models, node sizes or nodes without GPUs (which hold no
// GPU pod's home).
#pragma once

#include <cstdint>
#include <vector>

#include "place/cluster.h"
#include "place/fragmentation.h"

namespace gpuslice::place {

// How many more pods of class `c` fit on `node` now.
int Homes(const NodeState& node, const TargetClass& c);

// P(N >= homes) for N ~ Poisson(mean).
double PoissonTail(double mean, int64_t homes);

class HomePressure {
 public:
  // The classes of `target` (all_classes: every class of the list some node can hold) of at
  // least `min_gpus` GPUs, on `cluster` as the run starts.
  HomePressure(const TargetWorkload& target, const Cluster& cluster, int min_gpus);
  // Brings each node's homes up to date with the cluster and values every class's homes.
  void Update(const Cluster& cluster);
  // Whether any class's homes are worth something now (else Cost is 0 everywhere).
  bool AnyValued() const { return !active_.empty(); }
  // Milli-GPU of the pods to come expected to lose their home if `before` becomes `after`.
  double Cost(const NodeState& before, const NodeState& after) const;

 private:
  std::vector<TargetClass> classes_;
  std::vector<double> size_;     // milli-GPU of one pod of each class
  std::vector<int> node_homes_;  // [node * classes + class]
  std::vector<uint32_t> node_version_;
  std::vector<int64_t> homes_;  // per class, over the cluster
  std::vector<double> value_;   // per class: P(its last home will be wanted) x size
  std::vector<size_t> active_;  // classes whose homes are worth something now
  double gpu_per_pod_ = 0;      // the list's mean milli-GPU per pod
  double cpu_per_pod_ = 0;      // and milli-CPU
  double expected_pods_ = 0;    // pods to come before the free GPUs are taken
};

}  // namespace gpuslice::place
