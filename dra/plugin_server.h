// The driver's two gRPC endpoints: the DRAPlugin service (dra/v1) and the device health service
// (dra-health v1alpha1) on <plugin-dir>/dra.sock, which the kubelet calls to prepare and
// unprepare claims and watches for its devices' health, and the Registration service
// (pluginregistration v1) on <registry-dir>/<driver>-reg.sock, where the kubelet's plugin watcher
// finds the driver and learns the first socket (type DRAPlugin, versions v1.DRAPlugin and
// v1alpha1.DRAResourceHealth).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "dra/claim_preparer.h"
#include "dra/driver_config.h"
#include "dra/health_service.h"

namespace gpuslice::dra {

class PluginServer {
 public:
  PluginServer(const DriverConfig& config, ClaimPreparer* preparer, HealthService* health);
  ~PluginServer();

  // Serves both sockets (the DRAPlugin one first: it must answer once the kubelet learns it).
  // An error with one line when a socket cannot be served.
  Status Start();
  void Stop();
  std::string plugin_socket() const;
  std::string registration_socket() const;
  // Whether the kubelet reported the registration accepted (NotifyRegistrationStatus), and how
  // often it did: a kubelet that restarts registers the driver again, having deleted the node's
  // ResourceSlices, so each new registration is the cue to publish again.
  bool registered() const { return registered_; }
  int registrations() const { return registrations_; }

 private:
  class DraService;
  class RegistrationService;
  const DriverConfig config_;
  ClaimPreparer* const preparer_;
  HealthService* const health_;
  std::atomic<bool> registered_{false};
  std::atomic<int> registrations_{0};
  std::unique_ptr<DraService> dra_service_;
  std::unique_ptr<RegistrationService> registration_service_;
  std::unique_ptr<grpc::Server> dra_server_;
  std::unique_ptr<grpc::Server> registration_server_;
};

}  // namespace gpuslice::dra
