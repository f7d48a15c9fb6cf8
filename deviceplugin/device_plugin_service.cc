#include "deviceplugin/device_plugin_service.h"

#include <cstdio>

#include <fmt/format.h>

#include "deviceplugin/container_allocation.h"
#include "deviceplugin/preferred_allocation.h"

namespace gpuslice::deviceplugin {
namespace {

// How often a waiting ListAndWatch looks at its stream's cancellation and the plugin's stop.
constexpr int kWatchPollMs = 100;

grpc::Status Invalid(size_t container, const std::string& what) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      fmt::format("gpuslice-device-plugin: container request {}: {}", container, what));
}

// The request is well formed but this node cannot hold it as one device's slice; the kubelet
// fails the pod's admission with this message (it names the request and why).
grpc::Status Unplaceable(size_t container, const std::string& what) {
  fmt::print(stderr, "gpuslice-device-plugin: refused container request {}: {}\n", container, what);
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                      fmt::format("gpuslice-device-plugin: container request {}: {}", container, what));
}

// A refusal of PreferSlices or EditsForSlices as the kubelet gets it: InvalidArgument is a list
// the kubelet does not send, any other kind a request this node cannot hold.
grpc::Status Refusal(size_t container, const Status& refused) {
  return refused.code() == Status::Code::kInvalidArgument ? Invalid(container, refused.message())
                                                          : Unplaceable(container, refused.message());
}

}  // namespace

size_t ListBytes(const DeviceCatalog& catalog) {
  PluginConfig config;
  DevicePluginService service(catalog, config);
  v1beta1::ListAndWatchResponse response;
  service.FillList(catalog.Health(), &response);
  return response.ByteSizeLong();
}

grpc::Status DevicePluginService::GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                                         v1beta1::DevicePluginOptions* options) {
  options->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

void DevicePluginService::FillList(const DeviceCatalog::HealthView& health,
                                   v1beta1::ListAndWatchResponse* response) const {
  response->Clear();
  for (size_t p = 0; p < catalog_.gpus().size(); ++p) {
    const char* state = health.healthy[p] ? "Healthy" : "Unhealthy";
    const std::optional<int> numa = catalog_.gpus()[p].numa_node;
    for (const std::string& id : catalog_.SliceIds(p)) {
      v1beta1::Device* device = response->add_devices();
      device->set_id(id);
      device->set_health(state);
      // As NVIDIA's plugin does: the kubelet's topology manager aligns CPUs with it.
      if (numa) device->mutable_topology()->add_nodes()->set_id(*numa);
    }
  }
}

grpc::Status DevicePluginService::ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                                               grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  v1beta1::ListAndWatchResponse response;
  DeviceCatalog::HealthView health = catalog_.Health();
  uint64_t sent = 0;
  while (!health.stopping && !ending_ && !context->IsCancelled()) {
    if (health.version != sent) {
      FillList(health, &response);
      if (!writer->Write(response)) return grpc::Status::OK;  // the kubelet went away
      sent = health.version;
    }
    health = catalog_.WaitForChange(sent, kWatchPollMs);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::GetPreferredAllocation(grpc::ServerContext*,
                                                         const v1beta1::PreferredAllocationRequest* request,
                                                         v1beta1::PreferredAllocationResponse* response) {
  for (int c = 0; c < request->container_requests_size(); ++c) {
    const auto& container = request->container_requests(c);
    const std::vector<std::string> available(container.available_deviceids().begin(),
                                             container.available_deviceids().end());
    const std::vector<std::string> required(container.must_include_deviceids().begin(),
                                            container.must_include_deviceids().end());
    const Result<std::vector<std::string>> chosen =
        PreferSlices(catalog_, available, required, container.allocation_size(), config_.nvlink_island);
    if (!chosen.ok()) return Refusal(c, chosen.status());
    auto* out = response->add_container_responses();
    for (const std::string& id : *chosen) out->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                                           v1beta1::AllocateResponse* response) {
  if (request->container_requests_size() == 0) return Invalid(0, "the request names no container");
  for (int c = 0; c < request->container_requests_size(); ++c) {
    const auto& ids_in = request->container_requests(c).devices_ids();
    const std::vector<std::string> ids(ids_in.begin(), ids_in.end());
    Result<ContainerEdits> answer = EditsForSlices(catalog_, config_, ids);
    if (!answer.ok()) return Refusal(c, answer.status());
    ContainerEdits& edits = *answer;
    if (requests_) {  // held from now on, before the container starts
      std::string borrowed;
      if (Status held = requests_->Hold(edits.envs["GPUSLICE_TENANT"], edits.memory, &borrowed); !held.ok())
        return Unplaceable(static_cast<size_t>(c), held.message());
      if (!borrowed.empty()) fmt::print(stderr, "gpuslice-device-plugin: container request {}: {}\n", c, borrowed);
    }
    fmt::print(
        stderr,
        "gpuslice-device-plugin: container request {}: tenant {}, {} slices on {}, memory {} (limit {}), compute {}%\n",
        c, edits.envs["GPUSLICE_TENANT"], ids.size(), edits.envs["NVIDIA_VISIBLE_DEVICES"],
        edits.envs["GPUSLICE_MEMORY_REQUEST"], edits.envs["GPUSLICE_MEMORY_LIMIT"],
        edits.envs["GPUSLICE_COMPUTE_REQUEST"]);
    auto* out = response->add_container_responses();
    for (const auto& [name, value] : edits.envs) (*out->mutable_envs())[name] = value;
    for (const auto& [name, value] : edits.annotations) (*out->mutable_annotations())[name] = value;
    for (const ContainerMount& mount : edits.mounts) {
      auto* m = out->add_mounts();
      m->set_container_path(mount.container_path);
      m->set_host_path(mount.host_path);
      m->set_read_only(mount.read_only);
    }
    for (const std::string& name : edits.cdi_devices) out->add_cdi_devices()->set_name(name);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                                    v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;  // not requested in the options: nothing to do before a container starts
}

}  // namespace gpuslice::deviceplugin
