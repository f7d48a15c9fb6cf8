#include "place/stranded.h"

#include <bit>

namespace gpuslice::place {
namespace {

// `a` can use every GPU `b` can: no larger in any resource, allowed on at least b's models, and
// held to the same tier rule.
bool Undercuts(const Pod& a, const Pod& b) {
  if (a.keep_tier_apart != b.keep_tier_apart || (a.keep_tier_apart && a.tier != b.tier)) return false;
  if (a.isolated != b.isolated) return false;  // MIG instances against shared GPUs
  return a.cpu_milli <= b.cpu_milli && a.memory_mib <= b.memory_mib && a.num_gpu <= b.num_gpu &&
         a.gpu_milli <= b.gpu_milli && (a.model_mask & b.model_mask) == b.model_mask;
}

}  // namespace

int64_t NodeStrandedMilli(const NodeState& node, const std::vector<Pod>& shapes) {
  GpuMask usable = 0;
  for (const Pod& shape : shapes) {
    if (Fits(node, shape)) usable |= GpusWithRoom(node, shape);
  }
  int64_t milli = 0;
  for (int g = 0; g < node.gpus; ++g) {
    if (!((usable >> g) & 1)) milli += node.gpu_left[static_cast<size_t>(g)];
  }
  return milli;
}

void StrandedMeter::Count(const Pod& pod, int delta) {
  if (pod.num_gpu == 0) return;
  const Key key{pod.cpu_milli, pod.memory_mib, pod.num_gpu,
                pod.gpu_milli, pod.model_mask, (pod.keep_tier_apart ? pod.tier : -1) * 2 + (pod.isolated ? 1 : 0)};
  auto it = counts_.try_emplace(key, pod, 0).first;
  it->second.second += delta;
  if (it->second.second == 0) {
    counts_.erase(it);
    dirty_ = true;
  } else if (it->second.second == delta) {
    dirty_ = true;  // a shape newly pending
  }
}

int64_t StrandedMeter::StrandedMilli(const Cluster& cluster) {
  if (counts_.empty()) return 0;
  if (dirty_) {
    dirty_ = false;
    std::vector<Pod> minimal;
    for (const auto& [key, entry] : counts_) {
      bool undercut = false;
      for (const auto& [other_key, other] : counts_) {
        if (other_key != key && Undercuts(other.first, entry.first) &&
            !(Undercuts(entry.first, other.first) && key < other_key)) {  // of two equals, keep the first
          undercut = true;
          break;
        }
      }
      if (!undercut) minimal.push_back(entry.first);
    }
    auto same = [](const Pod& a, const Pod& b) {
      return a.keep_tier_apart == b.keep_tier_apart && a.tier == b.tier && a.isolated == b.isolated &&
             a.cpu_milli == b.cpu_milli && a.memory_mib == b.memory_mib && a.num_gpu == b.num_gpu &&
             a.gpu_milli == b.gpu_milli && a.model_mask == b.model_mask;
    };
    if (minimal.size() != minimal_.size() || !std::equal(minimal.begin(), minimal.end(), minimal_.begin(), same)) {
      minimal_ = std::move(minimal);
      ++set_version_;
    }
  }
  int64_t total = 0;
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    const NodeState& node = cluster.nodes[n];
    Entry& entry = cache_[n];
    if (entry.node_version != node.version || entry.set_version != set_version_) {
      entry = Entry{node.version, set_version_, NodeStrandedMilli(node, minimal_)};
    }
    total += entry.milli;
  }
  return total;
}

}  // namespace gpuslice::place
