// The tests' stand-in for the kubelet: the Registration service on <dir>/kubelet.sock, a client
// of the plugin's DevicePlugin service on the socket it registered, and the real plugin binary
// started as a child over the simulated NVML. No cluster is needed.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "api.grpc.pb.h"
#include "podresources.grpc.pb.h"
#include "tests/support/subprocess.h"

namespace gpuslice::testing {

struct Registration {
  v1beta1::RegisterRequest request;
  bool endpoint_was_serving = false;  // the plugin's socket answered when it registered
  double seconds_since_start = 0;     // since FakeKubelet::Start
};

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string dir);
  ~FakeKubelet();

  // Serves kubelet.sock (a restart is Stop, DeleteSockets, Start).
  void Start();
  void Stop();
  // What a restarting kubelet does to the directory: every socket in it is removed.
  void DeleteSockets();

  // Waits until `count` registrations arrived since the last Start; false on timeout.
  bool WaitForRegistrations(size_t count, int timeout_ms);
  std::vector<Registration> registrations();
  // A client of the endpoint registered for `resource` (empty when none was).
  std::unique_ptr<v1beta1::DevicePlugin::Stub> Connect(const std::string& resource);

 private:
  class Service;
  std::string dir_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

// The kubelet's pod-resources API (List) on a socket of its own, answering what the test says
// is allocated: a stand-in for /var/lib/kubelet/pod-resources/kubelet.sock.
class FakePodResources {
 public:
  explicit FakePodResources(std::string socket_path);
  ~FakePodResources();
  const std::string& socket_path() const { return socket_path_; }
  // The pods List answers from now on.
  void Set(v1::ListPodResourcesResponse pods);
  // How many List calls arrived.
  int lists();

 private:
  class Service;
  std::string socket_path_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
};

// A temporary device-plugins directory (short: unix socket paths are limited to 107 bytes).
std::string MakePluginDir();
void RemovePluginDir(const std::string& dir);

// The plugin binary over the simulated NVML, with its state directory and library in `dir`.
std::unique_ptr<Subprocess> StartPlugin(const std::string& dir, std::vector<std::string> extra_args = {});

// The ID list from the ListAndWatch stream's first answer.
std::vector<v1beta1::Device> FirstList(v1beta1::DevicePlugin::Stub& stub);

}  // namespace gpuslice::testing
