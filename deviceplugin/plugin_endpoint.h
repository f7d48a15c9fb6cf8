// The resource's endpoint: its gRPC server on <pluginDir>/<socket>, and its registration with
// the kubelet on <pluginDir>/kubelet.sock. The kubelet connects back only after Register, so
// the server is serving first (the API's order).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "deviceplugin/device_plugin_service.h"

namespace gpuslice::deviceplugin {

class PluginEndpoint {
 public:
  // `requests` (may be null): where Allocate holds each container's memory request.
  PluginEndpoint(const DeviceCatalog& catalog, const PluginConfig& config, SliceRequests* requests = nullptr);
  ~PluginEndpoint();

  const std::string& resource() const { return resource_; }
  const std::string& socket_path() const { return socket_path_; }

  // (Re)starts the server on a fresh socket. An error with one line when it cannot (never
  // Unavailable: a socket that cannot be served is not waited for).
  Status Serve();
  // Calls the kubelet's Register. An Unavailable error with the kubelet's answer when it fails.
  Status Register();
  // Ends the streams, stops the server and removes the socket.
  void Stop();
  // Whether our socket file is still the one we serve on (a restarting kubelet deletes it).
  bool SocketIntact() const;

 private:
  const DeviceCatalog& catalog_;
  const PluginConfig& config_;
  SliceRequests* const requests_;
  std::string resource_;
  std::string socket_name_;
  std::string socket_path_;
  std::unique_ptr<DevicePluginService> service_;
  std::unique_ptr<grpc::Server> server_;
  ino_t socket_inode_ = 0;
};

}  // namespace gpuslice::deviceplugin
