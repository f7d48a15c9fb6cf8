// Which pod each Kubernetes tenant is: gpuslice-device-plugin writes <state dir>/pods.json from
// the kubelet's pod-resources API (docs/kubernetes.md); `gpuslicectl status` shows the pod beside
// its tenant and the exporter labels the tenant's series with it. No file (not a Kubernetes node,
// or the plugin cannot reach the kubelet) or one that does not parse names no pod: status and
// the metrics must still work.
#pragma once

#include <map>
#include <string>

namespace gpuslice {

struct PodName {
  std::string namespace_name;
  std::string pod;
  std::string container;
  // "namespace/pod/container", with odd bytes shown as \xNN.
  std::string Text() const;
};

using PodNames = std::map<std::string, PodName>;  // by tenant name

PodNames ReadPodNames(const std::string& state_dir);

}  // namespace gpuslice
