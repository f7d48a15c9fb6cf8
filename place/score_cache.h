// FGD-like policies' cache of a node's evaluation for a pod. The evaluation depends only on the
// node's state and the pod's score class (cpu, gpu_milli, num_gpu), so it stays valid until the
// node changes (its version). Between two pods only one node changes: this turns ~1,200
// fragmentation evaluations per pod into about one.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "place/cluster.h"
#include "place/fragmentation.h"

namespace gpuslice::place {

template <class Choice>
class NodeScoreCache {
 public:
  // `target` must outlive the cache.
  NodeScoreCache(const TargetWorkload& target, size_t nodes, int score_classes)
      : target_(target), classes_(static_cast<size_t>(score_classes)), frag_(nodes), cache_(nodes * classes_) {}

  // evaluate(node, fragmentation before) -> Choice, called on a miss.
  template <class Evaluate>
  const Choice& Get(const Cluster& cluster, int node_index, const Pod& pod, const Evaluate& evaluate) {
    const NodeState& node = cluster.nodes[static_cast<size_t>(node_index)];
    Entry& entry = cache_[static_cast<size_t>(node_index) * classes_ + static_cast<size_t>(pod.score_class)];
    if (entry.version != node.version) {
      NodeFrag& frag = frag_[static_cast<size_t>(node_index)];
      if (frag.version != node.version) frag = NodeFrag{node.version, NodeFragmentation(node, target_)};
      entry = Entry{node.version, evaluate(node, frag.frag)};
    }
    return entry.choice;
  }

 private:
  static constexpr uint32_t kNever = std::numeric_limits<uint32_t>::max();
  struct NodeFrag {
    uint32_t version = kNever;
    double frag = 0;
  };
  struct Entry {
    uint32_t version = kNever;
    Choice choice;
  };

  const TargetWorkload& target_;
  size_t classes_;
  std::vector<NodeFrag> frag_;
  std::vector<Entry> cache_;
};

}  // namespace gpuslice::place
