// A stand-in for the kubelet's device manager, the part that books device IDs: it knows the
// healthy IDs the plugin advertised, which of them each admitted pod holds, and admits a pod's
// containers one by one as the kubelet does — the IDs GetPreferredAllocation names when it
// follows the plugin (the kubelet's default), or IDs of its own choosing when told to ignore it
// (any free ones, in a seeded random order) — then calls Allocate. A refusal from either call
// fails the pod's admission and frees what its earlier containers took, as the kubelet does.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "api.grpc.pb.h"
#include "podresources.pb.h"

namespace gpuslice::testing {

struct AdmittedContainer {
  std::string name;
  std::vector<std::string> ids;
  v1beta1::ContainerAllocateResponse answer;
};

struct Admission {
  bool admitted = false;
  std::string refusal;  // the plugin's message when it was refused
  std::vector<AdmittedContainer> containers;
};

class StatefulKubelet {
 public:
  StatefulKubelet(v1beta1::DevicePlugin::Stub& plugin, std::string resource, bool follow_preferred, uint32_t seed);

  // Reads the plugin's device list (its first ListAndWatch answer).
  void Refresh();
  // Admits pod `name` whose containers ask `slices` each. A pod asking more than the node has
  // free in total is refused here, as the scheduler would never bind it (refusal "node: ...").
  Admission Admit(const std::string& name, const std::vector<int>& slices);
  // The pod ended: its IDs are free again.
  void Remove(const std::string& name);

  size_t FreeCount() const { return healthy_.size() - allocated_.size(); }
  // Free slices per device UUID (devices with none free are absent).
  std::map<std::string, int> FreePerDevice() const;
  const std::map<std::string, Admission>& pods() const { return pods_; }
  // What the pod-resources API's List answers for the admitted pods.
  v1::ListPodResourcesResponse PodResources(const std::string& namespace_name) const;

 private:
  v1beta1::DevicePlugin::Stub& plugin_;
  std::string resource_;
  bool follow_preferred_;
  std::mt19937 random_;
  std::set<std::string> healthy_;
  std::set<std::string> allocated_;
  std::map<std::string, Admission> pods_;
};

}  // namespace gpuslice::testing
