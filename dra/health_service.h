// The kubelet's device health service (dra-health v1alpha1, dra/proto/dra_health_v1alpha1.proto),
// served on the DRAPlugin socket: each NodeWatchResources stream gets every published device's
// health (dra/device_health.h) at once, again whenever one changes, and at least every
// `resend` besides, each device with the time of the check and a timeout of three resends, after
// which the kubelet takes a device it heard nothing of as Unknown.
#pragma once

#include <chrono>
#include <string>

#include "dra/device_health.h"
#include "dra_health_v1alpha1.grpc.pb.h"

namespace gpuslice::dra {

// The service name a driver lists among its registration's supported versions to be watched.
inline constexpr char kHealthServiceName[] = "v1alpha1.DRAResourceHealth";

class HealthService final : public v1alpha1::DRAResourceHealth::Service {
 public:
  HealthService(std::string pool, const DeviceHealth* health, std::chrono::milliseconds resend)
      : pool_(std::move(pool)), health_(health), resend_(resend) {}

  grpc::Status NodeWatchResources(grpc::ServerContext* context, const v1alpha1::NodeWatchResourcesRequest* request,
                                  grpc::ServerWriter<v1alpha1::NodeWatchResourcesResponse>* writer) override;

  // The stream's next message: every device's health.
  v1alpha1::NodeWatchResourcesResponse Snapshot() const;

 private:
  const std::string pool_;
  const DeviceHealth* const health_;
  const std::chrono::milliseconds resend_;
};

}  // namespace gpuslice::dra
