// libFuzzer target: the kubelet's answers to the device plugin's pod-resources List, as the plugin
// turns them into the pods file (deviceplugin/pod_resources_names.h). The input is the answer's
// protobuf encoding (the seeds in fuzz/corpus/pod_resources are real answers' bytes). Whatever the
// kubelet answers, the text the plugin writes is one its readers (common/pod_names.h) accept
// whole, without a problem line, and it names every tenant it holds exactly as the plugin meant:
// a hostile or broken answer can leave pods unnamed, never unname the others or make the file
// one the readers refuse.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "common/pod_names.h"
#include "deviceplugin/pod_resources_names.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  v1::ListPodResourcesResponse answer;
  if (!answer.ParseFromArray(data, static_cast<int>(size))) return 0;
  size_t dropped = 0;
  const auto pods = gpuslice::deviceplugin::TenantPodsOf(answer, "gpuslice.io/gpu", &dropped);
  const std::string text = gpuslice::deviceplugin::PodsFileText(pods, &dropped);
  if (text.size() > gpuslice::kMaxPodsFileBytes) std::abort();
  const gpuslice::PodNamesRead read = gpuslice::ParsePodNames(text, "pods.json");
  if (!read.problem.empty()) std::abort();
  if (read.names.size() > pods.size()) std::abort();
  size_t kept = 0;
  for (const auto& [tenant, pod] : pods) {
    const auto it = read.names.find(tenant);
    if (it == read.names.end()) continue;  // left out for the file's bounds (counted in dropped)
    ++kept;
    if (it->second.namespace_name != pod.namespace_name || it->second.pod != pod.pod ||
        it->second.container != pod.container)
      std::abort();
  }
  if (kept != read.names.size() || kept + dropped < pods.size()) std::abort();
  return 0;
}
