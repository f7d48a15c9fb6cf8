#include "dra/plugin_server.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "common/printable.h"
#include "dra_v1.grpc.pb.h"
#include "pluginregistration_v1.grpc.pb.h"

namespace gpuslice::dra {

namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;

class PluginServer::DraService final : public drapb::DRAPlugin::Service {
 public:
  explicit DraService(ClaimPreparer* preparer) : preparer_(preparer) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*, const drapb::NodePrepareResourcesRequest* request,
                                    drapb::NodePrepareResourcesResponse* response) override {
    for (const auto& c : request->claims()) {
      drapb::NodePrepareResourceResponse& answer = (*response->mutable_claims())[c.uid()];
      const Result<std::vector<PreparedDevice>> devices = Guarded(c, [&] {
        return preparer_->Prepare({c.namespace_(), c.name(), c.uid()});
      });
      if (!devices.ok()) {
        fmt::print(stderr, "{}\n", devices.message());
        answer.set_error(devices.message());
        continue;
      }
      for (const auto& d : *devices) {
        drapb::Device* device = answer.add_devices();
        device->add_request_names(d.request);
        device->set_pool_name(d.pool);
        device->set_device_name(d.device);
        for (const auto& id : d.cdi_device_ids) device->add_cdi_device_ids(id);
        if (!d.share_id.empty()) device->set_share_id(d.share_id);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const drapb::NodeUnprepareResourcesRequest* request,
                                      drapb::NodeUnprepareResourcesResponse* response) override {
    for (const auto& c : request->claims()) {
      drapb::NodeUnprepareResourceResponse& answer = (*response->mutable_claims())[c.uid()];
      const Status unprepared = Guarded(c, [&] { return preparer_->Unprepare({c.namespace_(), c.name(), c.uid()}); });
      if (!unprepared.ok()) {
        fmt::print(stderr, "{}\n", unprepared.message());
        answer.set_error(unprepared.message());
      }
    }
    return grpc::Status::OK;
  }

 private:
  // One claim's call: whatever it throws (memory exhausted, a bug) is that claim's answer, and
  // the other claims of the call are still answered.
  template <typename Call>
  static auto Guarded(const drapb::Claim& c, Call call) -> decltype(call()) {
    try {
      return call();
    } catch (const std::exception& e) {
      return Status::Error(fmt::format("gpuslice-dra-driver: claim {}/{} failed: {}", Printable(c.namespace_()),
                                       Printable(c.name()), Printable(e.what())));
    }
  }

  ClaimPreparer* const preparer_;
};

class PluginServer::RegistrationService final : public pluginregistration::Registration::Service {
 public:
  RegistrationService(const DriverConfig& config, std::string endpoint, std::atomic<bool>* registered,
                      std::atomic<int>* registrations)
      : config_(config), endpoint_(std::move(endpoint)), registered_(registered), registrations_(registrations) {}

  grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                       pluginregistration::PluginInfo* info) override {
    info->set_type("DRAPlugin");
    info->set_name(config_.driver_name);
    info->set_endpoint(endpoint_);
    info->add_supported_versions("v1.DRAPlugin");  // first: the DRAPlugin version the kubelet uses
    info->add_supported_versions(kHealthServiceName);
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const pluginregistration::RegistrationStatus* status,
                                        pluginregistration::RegistrationStatusResponse*) override {
    *registered_ = status->plugin_registered();
    if (status->plugin_registered()) {
      ++*registrations_;
      fmt::print(stderr, "gpuslice-dra-driver: registered with the kubelet\n");
    } else {
      fmt::print(stderr, "gpuslice-dra-driver: the kubelet refused the registration: {}\n", status->error());
    }
    return grpc::Status::OK;
  }

 private:
  const DriverConfig& config_;
  const std::string endpoint_;
  std::atomic<bool>* const registered_;
  std::atomic<int>* const registrations_;
};

PluginServer::PluginServer(const DriverConfig& config, ClaimPreparer* preparer, HealthService* health)
    : config_(config), preparer_(preparer), health_(health) {}
PluginServer::~PluginServer() { Stop(); }

std::string PluginServer::plugin_socket() const { return fmt::format("{}/dra.sock", config_.plugin_dir); }

std::string PluginServer::registration_socket() const {
  return fmt::format("{}/{}-reg.sock", config_.registry_dir, config_.driver_name);
}

Status PluginServer::Start() {
  struct Endpoint {
    std::string socket;
    grpc::Service* service;
    std::unique_ptr<grpc::Server>* server;
    grpc::Service* also = nullptr;  // a second service on the same socket
  };
  dra_service_ = std::make_unique<DraService>(preparer_);
  registration_service_ =
      std::make_unique<RegistrationService>(config_, plugin_socket(), &registered_, &registrations_);
  for (const Endpoint& e : {Endpoint{plugin_socket(), dra_service_.get(), &dra_server_, health_},
                            Endpoint{registration_socket(), registration_service_.get(), &registration_server_}}) {
    unlink(e.socket.c_str());  // a stale socket of an earlier run refuses the bind
    grpc::ServerBuilder builder;
    builder.AddListeningPort(fmt::format("unix://{}", e.socket), grpc::InsecureServerCredentials());
    builder.RegisterService(e.service);
    if (e.also) builder.RegisterService(e.also);
    *e.server = builder.BuildAndStart();
    if (!*e.server) {
      Stop();
      return Status::Error(fmt::format("gpuslice-dra-driver: cannot serve on {}", e.socket));
    }
  }
  return Status::Ok();
}

void PluginServer::Stop() {
  // The registration socket first: the kubelet stops calling a plugin whose socket went away.
  for (auto* server : {&registration_server_, &dra_server_}) {
    if (!*server) continue;
    (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    (*server)->Wait();
    server->reset();
  }
  unlink(registration_socket().c_str());
  unlink(plugin_socket().c_str());
}

}  // namespace gpuslice::dra
