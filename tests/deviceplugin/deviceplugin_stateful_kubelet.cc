#include "tests/deviceplugin/deviceplugin_stateful_kubelet.h"

#include <algorithm>
#include <chrono>

#include <grpcpp/grpcpp.h>

#include "tests/deviceplugin/deviceplugin_fake_kubelet.h"

namespace gpuslice::testing {

StatefulKubelet::StatefulKubelet(v1beta1::DevicePlugin::Stub& plugin, std::string resource, bool follow_preferred,
                                 uint32_t seed)
    : plugin_(plugin), resource_(std::move(resource)), follow_preferred_(follow_preferred), random_(seed) {}

void StatefulKubelet::Refresh() {
  healthy_.clear();
  for (const auto& device : FirstList(plugin_)) {
    if (device.health() == "Healthy") healthy_.insert(device.id());
  }
}

Admission StatefulKubelet::Admit(const std::string& name, const std::vector<int>& slices) {
  Admission admission;
  int total = 0;
  for (int n : slices) total += n;
  if (static_cast<size_t>(total) > FreeCount()) {
    admission.refusal = "node: " + std::to_string(total) + " asked, " + std::to_string(FreeCount()) + " free";
    return admission;
  }
  std::vector<std::string> taken;  // by this pod's earlier containers
  auto fail = [&](const std::string& why) {
    for (const auto& id : taken) allocated_.erase(id);
    admission.containers.clear();
    admission.refusal = why;
    return admission;
  };
  for (size_t c = 0; c < slices.size(); ++c) {
    std::vector<std::string> available;
    for (const auto& id : healthy_) {
      if (!allocated_.contains(id)) available.push_back(id);
    }
    std::vector<std::string> chosen;
    if (follow_preferred_) {
      v1beta1::PreferredAllocationRequest request;
      auto* want = request.add_container_requests();
      for (const auto& id : available) want->add_available_deviceids(id);
      want->set_allocation_size(slices[c]);
      v1beta1::PreferredAllocationResponse response;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      const grpc::Status status = plugin_.GetPreferredAllocation(&context, request, &response);
      if (!status.ok()) return fail(status.error_message());
      chosen.assign(response.container_responses(0).deviceids().begin(),
                    response.container_responses(0).deviceids().end());
      for (const auto& id : chosen) {
        if (allocated_.contains(id) || !healthy_.contains(id))
          return fail("test: the plugin preferred a taken ID " + id);
      }
    } else {
      std::shuffle(available.begin(), available.end(), random_);
      chosen.assign(available.begin(), available.begin() + slices[c]);
    }
    v1beta1::AllocateRequest request;
    auto* container = request.add_container_requests();
    for (const auto& id : chosen) container->add_devices_ids(id);
    v1beta1::AllocateResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const grpc::Status status = plugin_.Allocate(&context, request, &response);
    if (!status.ok()) return fail(status.error_message());
    for (const auto& id : chosen) allocated_.insert(id);
    taken.insert(taken.end(), chosen.begin(), chosen.end());
    admission.containers.push_back({"c" + std::to_string(c), chosen, response.container_responses(0)});
  }
  admission.admitted = true;
  pods_[name] = admission;
  return admission;
}

std::map<std::string, int> StatefulKubelet::FreePerDevice() const {
  std::map<std::string, int> free;
  for (const auto& id : healthy_) {
    if (!allocated_.contains(id)) ++free[id.substr(0, id.find("::"))];
  }
  return free;
}

void StatefulKubelet::Remove(const std::string& name) {
  const auto pod = pods_.find(name);
  if (pod == pods_.end()) return;
  for (const auto& container : pod->second.containers) {
    for (const auto& id : container.ids) allocated_.erase(id);
  }
  pods_.erase(pod);
}

v1::ListPodResourcesResponse StatefulKubelet::PodResources(const std::string& namespace_name) const {
  v1::ListPodResourcesResponse response;
  for (const auto& [name, admission] : pods_) {
    auto* pod = response.add_pod_resources();
    pod->set_name(name);
    pod->set_namespace_(namespace_name);
    for (const auto& container : admission.containers) {
      auto* c = pod->add_containers();
      c->set_name(container.name);
      auto* devices = c->add_devices();
      devices->set_resource_name(resource_);
      for (const auto& id : container.ids) devices->add_device_ids(id);
    }
  }
  return response;
}

}  // namespace gpuslice::testing
