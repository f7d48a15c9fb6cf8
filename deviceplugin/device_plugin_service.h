// The kubelet's DevicePlugin service for the plugin's one resource (gpuslice.io/gpu) over the
// catalog. Errors are gRPC statuses whose message names the offending ID or field, or the
// request and why it cannot be one device's slice.
#pragma once

#include <atomic>

#include "api.grpc.pb.h"
#include "deviceplugin/device_catalog.h"
#include "deviceplugin/plugin_config.h"
#include "deviceplugin/slice_requests.h"

namespace gpuslice::deviceplugin {

// The size in bytes of the whole ListAndWatch answer for `catalog`.
size_t ListBytes(const DeviceCatalog& catalog);

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  // `requests` (may be null): where Allocate holds each container's memory request.
  DevicePluginService(const DeviceCatalog& catalog, const PluginConfig& config, SliceRequests* requests = nullptr)
      : catalog_(catalog), config_(config), requests_(requests) {}

  // Ends the ListAndWatch streams of this service (before its server shuts down).
  void EndStreams() { ending_ = true; }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* options) override;
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override;
  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override;
  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override;

  void FillList(const DeviceCatalog::HealthView& health, v1beta1::ListAndWatchResponse* response) const;

 private:
  const DeviceCatalog& catalog_;
  const PluginConfig& config_;
  SliceRequests* const requests_;
  std::atomic<bool> ending_{false};
};

}  // namespace gpuslice::deviceplugin
