// libFuzzer target: the pods file as gpuslicectl status and the exporter parse it
// (common/pod_names.h ParsePodNames). Any file is read or refused, never crashes or hangs or
// costs more than one pass and one bounded parse; a kept entry is within the bounds the readers
// promise (a tenant name of 1 to 63 bytes; namespace, pod and container within Kubernetes'), and
// there are never more than kMaxPodsFileTenants of them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/pod_names.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const gpuslice::PodNamesRead read = gpuslice::ParsePodNames(text, "fuzz.json");
  if (read.names.size() > gpuslice::kMaxPodsFileTenants) std::abort();
  for (const auto& [tenant, pod] : read.names) {
    if (tenant.empty() || tenant.size() > gpuslice::kMaxTenantNameBytes) std::abort();
    if (pod.namespace_name.size() > gpuslice::kMaxNamespaceBytes || pod.pod.size() > gpuslice::kMaxPodNameBytes ||
        pod.container.size() > gpuslice::kMaxContainerNameBytes)
      std::abort();
    // What status prints: one line of printable ASCII whatever the bytes.
    for (const char c : pod.Text())
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) std::abort();
  }
  // A refusal says so, naming the file.
  if (!read.problem.empty() && read.problem.find("fuzz.json") == std::string::npos) std::abort();
  return 0;
}
