// The kubelet's pod-resources answer turned into the pods file (common/pod_names.h): which tenant
// (the name Allocate gave a container, from its slice IDs) is which pod. Pure functions of the
// answer, so that the fuzzer (fuzz/pod_resources_fuzzer.cc) checks exactly what the plugin
// writes: whatever the kubelet answers, the file is one its readers accept whole.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "podresources.pb.h"

namespace gpuslice::deviceplugin {

struct PodOfTenant {
  std::string namespace_name;
  std::string pod;
  std::string container;
  std::string devices;  // the UUIDs its slices are on, comma-separated (at most kMaxListedDevices)
  int slices = 0;
};

inline constexpr size_t kMaxListedDevices = 8;

// Tenant name -> pod, for the containers holding `resource`. A container whose namespace, pod or
// container name is longer than Kubernetes allows (the readers' bounds) is left out and counted
// in *dropped.
std::map<std::string, PodOfTenant> TenantPodsOf(const v1::ListPodResourcesResponse& answer, const std::string& resource,
                                                size_t* dropped);

// The file's text: {"written_by": ..., "tenants": {...}}, within kMaxPodsFileBytes and
// kMaxPodsFileTenants; entries past them are left out (in tenant-name order) and counted in
// *dropped.
std::string PodsFileText(const std::map<std::string, PodOfTenant>& pods, size_t* dropped);

}  // namespace gpuslice::deviceplugin
