#include "place/impossible.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpuslice::place {
namespace {

// "120", "120.2", "0.05": cores without trailing zeros.
std::string Cores(int64_t milli) {
  const std::string whole = std::to_string(milli / 1000);
  if (milli % 1000 == 0) return whole;
  std::string fraction = std::to_string(milli % 1000 + 1000).substr(1);
  while (fraction.back() == '0') fraction.pop_back();
  return whole + "." + fraction;
}

// "T4|P100": the models a pod's gpu_spec names, as the list writes them.
std::string Models(const std::vector<std::string>& models) {
  std::string text;
  for (const std::string& m : models) text += (text.empty() ? "" : "|") + m;
  return text;
}

// Which of the pod's asks no node meets, naming the best a node offers. Checked in the order
// GPU model, GPUs, CPU, memory, so the first unmet one is the reason given.
std::string Why(const Cluster& cluster, const Pod& pod) {
  if (pod.num_gpu > 0 && pod.model_mask == 0) {
    std::string present;
    for (const std::string& m : cluster.models) present += (present.empty() ? "" : ", ") + m;
    return "no node has a GPU of its models (the cluster has " + present + ")";
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
  const std::string with = pod.num_gpu > 0 ? " with " + std::to_string(pod.num_gpu) + " GPUs of its models" : "";
  if (most_gpus < pod.num_gpu) return "the most GPUs a node of its models has is " + std::to_string(most_gpus);
  if (most_cpu < pod.cpu_milli) return "the most cores a node" + with + " has is " + Cores(most_cpu);
  if (most_memory < pod.memory_mib) {
    return "the most memory a node" + with + " and its cores has is " + std::to_string(most_memory) + " MiB";
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
      c.shape = (pod.num_gpu > 0 ? std::to_string(pod.num_gpu) + " GPU" + (pod.num_gpu > 1 ? "s" : "") + " x " +
                                       std::to_string(pod.gpu_milli) + " milli-GPU" +
                                       (specs[i].gpu_models.empty() ? "" : " of " + Models(specs[i].gpu_models)) + ", "
                                 : std::string("no GPU, ")) +
                Cores(pod.cpu_milli) + " cores, " + std::to_string(pod.memory_mib) + " MiB";
      c.why = Why(cluster, pod);
      classes.push_back(c);
    }
    ++classes[it->second].count;
  }
  return classes;
}

std::string ImpossibleWarning(const std::string& pod_path, const ImpossibleClass& c) {
  return "gpuslice-place: warning: " + pod_path + ":" + std::to_string(c.first_line) + ": " + std::to_string(c.count) +
         (c.count == 1 ? " pod (" : " pods (the first ") + c.first_pod + ") ask" + (c.count == 1 ? "s" : "") + " for " +
         c.shape + ", which no node can hold: " + c.why +
         "; counted as failed when they arrive, kept out of the target workload";
}

}  // namespace gpuslice::place
