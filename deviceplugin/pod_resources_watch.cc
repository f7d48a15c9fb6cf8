#include "deviceplugin/pod_resources_watch.h"

#include <set>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "common/mutex_lock.h"
#include "common/replace_file.h"
#include "podresources.grpc.pb.h"

namespace gpuslice::deviceplugin {

Result<std::map<std::string, PodOfTenant>> ListTenantPods(const std::string& socket, const std::string& resource,
                                                          int timeout_ms, size_t* dropped) {
  auto stub = v1::PodResourcesLister::NewStub(
      grpc::CreateChannel(fmt::format("unix://{}", socket), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  v1::ListPodResourcesResponse response;
  const grpc::Status status = stub->List(&context, v1::ListPodResourcesRequest(), &response);
  if (!status.ok()) {
    return Status::Unavailable(
        fmt::format("the kubelet's pod-resources API at {} did not answer List: {}", socket, status.error_message()));
  }
  return TenantPodsOf(response, resource, dropped);
}

Status WritePodsFile(const std::string& path, const std::map<std::string, PodOfTenant>& pods, size_t* dropped) {
  const std::string text = PodsFileText(pods, dropped);
  // Its directory is the plugin's own (created 0755 when missing; readers refuse a file others
  // may write).
  const std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty() && mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::Error(fmt::format("cannot create {} for {}: {}", dir, path, std::strerror(errno)));
  if (Status written = ReplaceFile(path, text); !written.ok()) {
    return Status::Error(fmt::format("cannot write {}: {}", path, written.message()));
  }
  return Status::Ok();
}

PodResourcesWatch::PodResourcesWatch(const PluginConfig& config, int interval_ms, SliceRequests* requests)
    : requests_(requests) {
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
  size_t dropped = 0;
  Result<std::map<std::string, PodOfTenant>> listed =
      ListTenantPods(config.pod_resources_socket, config.resource, 1000, &dropped);
  if (!listed.ok()) {
    if (!failing_)
      fmt::print(stderr, "gpuslice-device-plugin: {}; tenants are not named after their pods until it does\n",
                 listed.message());
    failing_ = true;
    return;
  }
  std::map<std::string, PodOfTenant> pods = std::move(listed).value();
  if (failing_) fmt::print(stderr, "gpuslice-device-plugin: the pod-resources API answers again\n");
  failing_ = false;
  if (requests_ && dropped == 0) {  // a List that left containers out cannot tell who is gone
    std::set<std::string> live;
    for (const auto& entry : pods) live.insert(entry.first);
    for (const std::string& tenant : requests_->Reconcile(live))
      fmt::print(stderr, "gpuslice-device-plugin: tenant {}'s pod is gone: its memory request is released\n", tenant);
  }
  auto same = [](const PodOfTenant& a, const PodOfTenant& b) {
    return a.namespace_name == b.namespace_name && a.pod == b.pod && a.container == b.container &&
           a.devices == b.devices && a.slices == b.slices;
  };
  if (written_once_ && pods.size() == written_.size() &&
      std::equal(pods.begin(), pods.end(), written_.begin(),
                 [&](const auto& a, const auto& b) { return a.first == b.first && same(a.second, b.second); }))
    return;
  const std::string& path = config.pods_file;
  if (Status written = WritePodsFile(path, pods, &dropped); !written.ok()) {
    fmt::print(stderr, "gpuslice-device-plugin: {}\n", written.message());
    return;
  }
  if (dropped != dropped_said_) {
    fmt::print(
        stderr,
        "gpuslice-device-plugin: {} of the kubelet's containers are not named in {} (names longer than Kubernetes allows or not UTF-8, or past the file's {} tenants or {} bytes)\n",
        dropped, path, kMaxPodsFileTenants, static_cast<size_t>(kMaxPodsFileBytes));
    dropped_said_ = dropped;
  }
  for (const auto& [tenant, pod] : pods) {
    if (!written_.contains(tenant))
      fmt::print(stderr, "gpuslice-device-plugin: tenant {} is pod {}/{} container {} ({} slices on {})\n", tenant,
                 pod.namespace_name, pod.pod, pod.container, pod.slices, pod.devices);
  }
  written_ = std::move(pods);
  written_once_ = true;
}

}  // namespace gpuslice::deviceplugin
