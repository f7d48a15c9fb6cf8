#include "dra/health_service.h"

#include <algorithm>

namespace gpuslice::dra {
namespace {

constexpr size_t kMaxMessage = 1024;  // the kubelet truncates longer messages

}  // namespace

v1alpha1::NodeWatchResourcesResponse HealthService::Snapshot() const {
  v1alpha1::NodeWatchResourcesResponse response;
  const int64_t timeout_s = std::max<int64_t>(1, 3 * resend_.count() / 1000 + 1);
  for (const auto& [name, c] : health_->Conditions()) {
    v1alpha1::DeviceHealth* d = response.add_devices();
    d->mutable_device()->set_pool_name(pool_);
    d->mutable_device()->set_device_name(name);
    d->set_health(c.healthy ? v1alpha1::HEALTHY : v1alpha1::UNHEALTHY);
    d->set_last_updated_time(c.checked);
    d->set_health_check_timeout_seconds(timeout_s);
    d->set_message(c.message.substr(0, kMaxMessage));
  }
  return response;
}

grpc::Status HealthService::NodeWatchResources(grpc::ServerContext* context, const v1alpha1::NodeWatchResourcesRequest*,
                                               grpc::ServerWriter<v1alpha1::NodeWatchResourcesResponse>* writer) {
  // Woken by a change, by the resend interval, or every 100 ms to notice a cancelled stream.
  const auto tick = std::min(resend_, std::chrono::milliseconds(100));
  auto sent_at = std::chrono::steady_clock::time_point{};
  uint64_t sent = ~uint64_t{0};
  while (!context->IsCancelled() && !health_->stopped()) {
    const uint64_t now_version = health_->version();
    const auto now = std::chrono::steady_clock::now();
    if (now_version != sent || now - sent_at >= resend_) {
      if (!writer->Write(Snapshot())) break;  // the kubelet went away
      sent = now_version;
      sent_at = now;
    }
    health_->WaitForChange(sent, tick);
  }
  return grpc::Status::OK;
}

}  // namespace gpuslice::dra
