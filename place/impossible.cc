#include "place/impossible.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gpuslice::place {
namespace {

// "120", "120.2", "0.05": cores without trailing zeros.
std::string Cores(int64_t milli) {
  if (milli % 1000 == 0) return fmt::to_string(milli / 1000);
  std::string text = fmt::format("{}.{:03}", milli / 1000, milli % 1000);
  while (text.back() == '0') text.pop_back();
  return text;
}

// "T4|P100": the models a pod's gpu_spec names, as the list writes them.
std::string Models(const std::vector<std::string>& models) { return fmt::format("{}", fmt::join(models, "|")); }

// Which of the pod's asks no node meets, naming the best a node offers. Checked in the order
// GPU model, GPUs, CPU, memory, so the first unmet one is the reason given.
std::string Why(const Cluster& cluster, const Pod& pod) {
  if (pod.num_gpu > 0 && pod.model_mask == 0) {
    return fmt::format("no node has a GPU of its models (the cluster has {})", fmt::join(cluster.models, ", "));
  }
  int most_gpus = 0;
  int64_t most_cpu = 0, most_memory = 0;
  for (const NodeState& node : cluster.nodes) {
    const bool model_ok = pod.num_gpu == 0 || (node.model >= 0 && ((pod.model_mask >> node.model) & 1));
    if (!model_ok) continue;
    most_gpus = std::max(most_gpus, node.gpus);
    if (node.gpus < pod.num_gpu) continue;
    most_cpu = std::max(most_cpu, node.cpu_left);
    if (node.cpu_left < pod.cpu_milli) continue;
    most_memory = std::max(most_memory, node.memory_left);
  }
  const std::string with = pod.num_gpu > 0 ? fmt::format(" with {} GPUs of its models", pod.num_gpu) : "";
  if (most_gpus < pod.num_gpu) return fmt::format("the most GPUs a node of its models has is {}", most_gpus);
  if (most_cpu < pod.cpu_milli) return fmt::format("the most cores a node{} has is {}", with, Cores(most_cpu));
  if (most_memory < pod.memory_mib) {
    return fmt::format("the most memory a node{} and its cores has is {} MiB", with, most_memory);
  }
  return "no node has its GPUs, cores and memory together";
}

}  // namespace

std::vector<ImpossibleClass> FindImpossiblePods(const Cluster& cluster, const std::vector<PodSpec>& specs,
                                                const std::vector<Pod>& pods, std::vector<bool>* impossible) {
  impossible->assign(pods.size(), false);
  using Key = std::tuple<int64_t, int64_t, int, int, uint64_t, std::string>;
  std::map<Key, size_t> index;
  std::vector<ImpossibleClass> classes;
  for (size_t i = 0; i < pods.size(); ++i) {
    const Pod& pod = pods[i];
    const bool fits =
        std::any_of(cluster.nodes.begin(), cluster.nodes.end(), [&](const NodeState& node) { return Fits(node, pod); });
    if (fits) continue;
    (*impossible)[i] = true;
    // Pods pinned to models the cluster lacks all have an empty mask: told apart by their gpu_spec.
    const Key key{pod.cpu_milli, pod.memory_mib, pod.num_gpu,
                  pod.gpu_milli, pod.model_mask, pod.model_mask == 0 ? Models(specs[i].gpu_models) : ""};
    auto [it, added] = index.emplace(key, classes.size());
    if (added) {
      ImpossibleClass c;
      c.first_pod = specs[i].name;
      c.first_line = specs[i].line;
      const std::string gpus =
          pod.num_gpu == 0
              ? "no GPU"
              : fmt::format("{} GPU{} x {} milli-GPU{}", pod.num_gpu, pod.num_gpu > 1 ? "s" : "", pod.gpu_milli,
                            specs[i].gpu_models.empty() ? "" : fmt::format(" of {}", Models(specs[i].gpu_models)));
      c.shape = fmt::format("{}, {} cores, {} MiB", gpus, Cores(pod.cpu_milli), pod.memory_mib);
      c.why = Why(cluster, pod);
      classes.push_back(c);
    }
    ++classes[it->second].count;
  }
  return classes;
}

std::string ImpossibleWarning(const std::string& pod_path, const ImpossibleClass& c) {
  return fmt::format(
      "gpuslice-place: warning: {}:{}: {} {}{}) ask{} for {}, which no node can hold: {}; counted as failed when they arrive, kept out of the target workload",
      pod_path, c.first_line, c.count, c.count == 1 ? "pod (" : "pods (the first ", c.first_pod,
      c.count == 1 ? "s" : "", c.shape, c.why);
}

}  // namespace gpuslice::place
