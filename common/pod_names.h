// Which pod each Kubernetes tenant is: gpuslice-device-plugin writes the pods file from the
// kubelet's pod-resources API (docs/kubernetes.md); `gpuslicectl status` shows the pod beside its
// tenant and the exporter labels the tenant's series with it.
//
// The file lives outside the state directory, which every tenant's container mounts read-write: in
// the state directory any tenant could name every other tenant's pod. It is read as a file someone
// may have replaced (common/guarded_file.h) and parsed within bounds: at most kMaxPodsFileBytes,
// nested no deeper than the format, names no longer than Kubernetes allows. No file (not a
// Kubernetes node, or the plugin cannot reach the kubelet) names no pod; a file that is not what
// the plugin writes names no pod either, and says why in one line: status and the metrics still
// work.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace gpuslice {

// Where the device plugin writes it and where status and the exporter look (--pods-file).
inline constexpr char kDefaultPodsFile[] = "/run/gpuslice-pods/pods.json";
// A node's map is a few hundred bytes per tenant; 1 MiB holds thousands.
inline constexpr uint64_t kMaxPodsFileBytes = 1 << 20;
inline constexpr size_t kMaxPodsFileTenants = 1024;
// Kubernetes' own bounds (a namespace and a container name are DNS labels, a pod's name a DNS
// subdomain) and the broker's for a tenant name, in bytes.
inline constexpr size_t kMaxNamespaceBytes = 63;
inline constexpr size_t kMaxPodNameBytes = 253;
inline constexpr size_t kMaxContainerNameBytes = 63;
inline constexpr size_t kMaxTenantNameBytes = 63;

struct PodName {
  std::string namespace_name;
  std::string pod;
  std::string container;
  // "namespace/pod/container", with odd bytes shown as \xNN.
  std::string Text() const;
};

using PodNames = std::map<std::string, PodName>;  // by tenant name

struct PodNamesRead {
  PodNames names;
  // One line saying why the file, or some of its entries, name no pod; "" when all is well or
  // there is no file.
  std::string problem;
};

PodNamesRead ReadPodNames(const std::string& pods_file);

// The file's contents parsed (what ReadPodNames does once it has them); `path` names it in the
// problem line.
PodNamesRead ParsePodNames(std::string_view text, const std::string& path);

}  // namespace gpuslice
