#include "deviceplugin/pod_resources_watch.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "common/mutex_lock.h"
#include "common/replace_file.h"
#include "deviceplugin/device_ids.h"
#include "podresources.grpc.pb.h"

namespace gpuslice::deviceplugin {

Result<std::map<std::string, PodOfTenant>> ListTenantPods(const std::string& socket, const std::string& resource,
                                                          int timeout_ms) {
  auto stub =
      v1::PodResourcesLister::NewStub(grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  v1::ListPodResourcesResponse response;
  const grpc::Status status = stub->List(&context, v1::ListPodResourcesRequest(), &response);
  if (!status.ok()) {
    return Status::Unavailable("the kubelet's pod-resources API at " + socket +
                               " did not answer List: " + status.error_message());
  }
  std::map<std::string, PodOfTenant> pods;
  for (const auto& pod : response.pod_resources()) {
    for (const auto& container : pod.containers()) {
      for (const auto& devices : container.devices()) {
        if (devices.resource_name() != resource || devices.device_ids().empty()) continue;
        const std::vector<std::string> ids(devices.device_ids().begin(), devices.device_ids().end());
        PodOfTenant entry{pod.namespace_(), pod.name(), container.name(), "", static_cast<int>(ids.size())};
        std::vector<std::string> uuids;
        for (const std::string& id : ids) {
          const auto slice = ParseSliceId(id);
          if (slice && std::find(uuids.begin(), uuids.end(), slice->device_uuid) == uuids.end())
            uuids.push_back(slice->device_uuid);
        }
        for (const std::string& uuid : uuids) entry.devices += (entry.devices.empty() ? "" : ",") + uuid;
        pods[TenantNameForIds(ids)] = entry;
      }
    }
  }
  return pods;
}

Status WritePodsFile(const std::string& path, const std::map<std::string, PodOfTenant>& pods) {
  nlohmann::ordered_json tenants = nlohmann::ordered_json::object();
  for (const auto& [tenant, pod] : pods) {
    tenants[tenant] = {{"namespace", pod.namespace_name},
                       {"pod", pod.pod},
                       {"container", pod.container},
                       {"devices", pod.devices},
                       {"slices", pod.slices}};
  }
  const nlohmann::ordered_json file = {{"written_by", "gpuslice-device-plugin"}, {"tenants", tenants}};
  const std::string text = file.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  if (Status written = ReplaceFile(path, text); !written.ok()) {
    return Status::Error("cannot write " + path + ": " + written.message());
  }
  return Status::Ok();
}

PodResourcesWatch::PodResourcesWatch(const PluginConfig& config, int interval_ms) {
  if (config.pod_resources_socket.empty()) return;
  thread_ = std::thread([this, config, interval_ms] {
    for (int wait_ms = 0; !StopAsked(wait_ms); wait_ms = interval_ms) Poll(config);
  });
}

PodResourcesWatch::~PodResourcesWatch() {
  {
    MutexLock lock(&mutex_);
    stop_ = true;
  }
  wake_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

bool PodResourcesWatch::StopAsked(int wait_ms) {
  MutexLock lock(&mutex_);
  return wake_.WaitFor(&mutex_, std::chrono::milliseconds(wait_ms), [this]() REQUIRES(mutex_) { return stop_; });
}

void PodResourcesWatch::Poll(const PluginConfig& config) {
  // Pods keep their names only as long as the kubelet answers: an old map is left as it was
  // (a tenant's pod does not change while it runs), and the log says so once.
  Result<std::map<std::string, PodOfTenant>> listed =
      ListTenantPods(config.pod_resources_socket, config.resource, 1000);
  if (!listed.ok()) {
    if (!failing_)
      std::fprintf(stderr, "gpuslice-device-plugin: %s; tenants are not named after their pods until it does\n",
                   listed.message().c_str());
    failing_ = true;
    return;
  }
  std::map<std::string, PodOfTenant> pods = std::move(listed).value();
  if (failing_) std::fprintf(stderr, "gpuslice-device-plugin: the pod-resources API answers again\n");
  failing_ = false;
  auto same = [](const PodOfTenant& a, const PodOfTenant& b) {
    return a.namespace_name == b.namespace_name && a.pod == b.pod && a.container == b.container &&
           a.devices == b.devices && a.slices == b.slices;
  };
  if (written_once_ && pods.size() == written_.size() &&
      std::equal(pods.begin(), pods.end(), written_.begin(),
                 [&](const auto& a, const auto& b) { return a.first == b.first && same(a.second, b.second); }))
    return;
  const std::string path = config.host_state_dir + "/" + kPodsFileName;
  if (Status written = WritePodsFile(path, pods); !written.ok()) {
    std::fprintf(stderr, "gpuslice-device-plugin: %s\n", written.message().c_str());
    return;
  }
  for (const auto& [tenant, pod] : pods) {
    if (!written_.contains(tenant))
      std::fprintf(stderr, "gpuslice-device-plugin: tenant %s is pod %s/%s container %s (%d slices on %s)\n",
                   tenant.c_str(), pod.namespace_name.c_str(), pod.pod.c_str(), pod.container.c_str(), pod.slices,
                   pod.devices.c_str());
  }
  written_ = std::move(pods);
  written_once_ = true;
}

}  // namespace gpuslice::deviceplugin
