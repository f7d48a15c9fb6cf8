// Stranded GPUs: idle GPU capacity that no pending pod can use. A GPU's idle share is stranded
// when no pending GPU pod fits its node (CPU, memory, model, enough GPUs with room) with this GPU
// among those it could take. Unlike FGD's fragmentation (an expectation over the workload's
// classes), it asks about the pods actually waiting: in the replay, the queued pods; in FGD's
// experiment, the pods of the run not placed (failed, or still to arrive).
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "place/cluster.h"

namespace gpuslice::place {

// Idle milli-GPU on `node` that none of `shapes` can use.
int64_t NodeStrandedMilli(const NodeState& node, const std::vector<Pod>& shapes);

// The cluster's stranded milli-GPU as the pending pods come and go. Only the pending shapes that
// no other pending shape undercuts matter (a GPU a larger pod could use, a smaller one can too), so
// the per-node results stay valid until the node or that minimal set changes.
class StrandedMeter {
 public:
  explicit StrandedMeter(size_t nodes) : cache_(nodes) {}
  void AddPending(const Pod& pod) { Count(pod, +1); }
  void RemovePending(const Pod& pod) { Count(pod, -1); }
  bool AnyPending() const { return !counts_.empty(); }
  // 0 while no GPU pod is pending (there is nothing for an idle GPU to be stranded from).
  int64_t StrandedMilli(const Cluster& cluster);

 private:
  using Key = std::tuple<int64_t, int64_t, int, int, uint64_t, int>;
  void Count(const Pod& pod, int delta);

  struct Entry {
    uint32_t node_version = UINT32_MAX;
    uint32_t set_version = UINT32_MAX;
    int64_t milli = 0;
  };
  std::map<Key, std::pair<Pod, int>> counts_;  // pending GPU pods by shape
  bool dirty_ = false;
  std::vector<Pod> minimal_;
  uint32_t set_version_ = 0;
  std::vector<Entry> cache_;
};

}  // namespace gpuslice::place
