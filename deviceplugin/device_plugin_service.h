// The kubelet's DevicePlugin service for one resource (gpu-memory or gpu-compute) over the
// shared catalog. Errors are gRPC statuses whose message names the offending ID or field.
#pragma once

#include <atomic>

#include "deviceplugin/device_catalog.h"
#include "deviceplugin/plugin_config.h"
#include "api.grpc.pb.h"

namespace gpuslice::deviceplugin {

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  DevicePluginService(const DeviceCatalog& catalog, const PluginConfig& config, UnitKind kind)
      : catalog_(catalog), config_(config), kind_(kind) {}

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

 private:
  void FillList(const DeviceCatalog::HealthView& health, v1beta1::ListAndWatchResponse* response) const;

  const DeviceCatalog& catalog_;
  const PluginConfig& config_;
  const UnitKind kind_;
  std::atomic<bool> ending_{false};
};

}  // namespace gpuslice::deviceplugin
