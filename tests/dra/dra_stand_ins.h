// The DRA driver's tests' stand-ins for a cluster (no kube-apiserver or kubelet here), built
// from the real definitions and kept small:
// - StandInApiServer: HTTP+JSON on 127.0.0.1 with the API server's paths for what the driver
//   does — GET a ResourceClaim (served from what the test set), POST/GET/PUT ResourceSlices —
//   validating every ResourceSlice it receives against the official resource.k8s.io/v1
//   OpenAPI schema (tests/dra/dra_validate.py) and refusing it with 422, as the API server would.
// - StandInKubelet: the kubelet's side of the real pluginregistration v1, dra v1 and dra-health
//   v1alpha1 protos — GetInfo on the registration socket, then NodePrepareResources and
//   NodeUnprepareResources, and the health stream when the driver lists its service.
// - StartDriver: the real gpuslice-dra-driver over the simulated NVML.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "dra_health_v1alpha1.grpc.pb.h"
#include "dra_v1.grpc.pb.h"
#include "pluginregistration_v1.grpc.pb.h"
#include "tests/support/subprocess.h"

namespace httplib {
class Server;
}

namespace gpuslice::testing {

namespace drapb = k8s::io::kubelet::pkg::apis::dra::v1;

class StandInApiServer {
 public:
  // `token`: the bearer token every request must carry (empty: none needed); `port`: 0 for any;
  // `cert_file` and `key_file`: HTTPS with that certificate (empty: HTTP).
  explicit StandInApiServer(std::string token = "", int port = 0, const std::string& cert_file = "",
                            const std::string& key_file = "");
  ~StandInApiServer();
  std::string url() const;
  void Stop();  // the API server goes down (its port refuses connections)

  void SetClaim(const nlohmann::json& claim);
  void DeleteSlices();                            // what a restarting kubelet does to its node's slices
  std::vector<nlohmann::json> accepted_slices();  // every slice written, in order
  std::vector<std::string> refused_slices();      // the schema's verdicts on slices refused
  bool WaitForSlices(size_t count, int timeout_ms);
  int claim_reads();

 private:
  bool Validate(const nlohmann::json& slice, std::string* why);
  std::string token_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  bool tls_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, nlohmann::json> claims_;  // "<namespace>/<name>"
  std::map<std::string, nlohmann::json> slices_;  // by name, as stored
  std::vector<nlohmann::json> accepted_;
  std::vector<std::string> refused_;
  int claim_reads_ = 0;
  int version_ = 0;
};

// A ResourceClaim as the scheduler leaves it: allocated `device` of pool `node` for request
// "gpu", with the consumed capacity given (skipped when empty) and opaque configurations.
struct ClaimSpec {
  std::string claim_namespace = "default";
  std::string name;
  std::string uid;
  std::string node = "node-a";
  std::string device = "gpu-0";
  std::string memory;                               // consumedCapacity memory, e.g. "10Gi"
  std::string compute;                              // consumedCapacity compute, e.g. "30"
  nlohmann::json config = nlohmann::json::array();  // status.allocation.devices.config
  std::string request = "gpu";                      // the result's request ("gpu/small": a firstAvailable subrequest)
};
nlohmann::json MakeClaim(const ClaimSpec& spec);
// The shareID the scheduler gives the claim's result: one per claim that consumes capacity
// (a share of a device), none for a device allocated whole.
std::string ShareIdOf(const ClaimSpec& spec);
// An opaque configuration of this driver's, as the allocation carries it.
nlohmann::json OpaqueConfig(const std::string& source, const nlohmann::json& parameters);

class StandInKubelet {
 public:
  explicit StandInKubelet(std::string registration_socket);
  ~StandInKubelet();
  // What the kubelet's plugin watcher does with a new socket: GetInfo, check it is a DRA plugin
  // of version v1.DRAPlugin, connect to its endpoint, NotifyRegistrationStatus. False with why.
  bool Register(std::string* error);
  pluginregistration::PluginInfo info() const { return info_; }
  // NodePrepareResources / NodeUnprepareResources for claims (namespace, name, uid).
  grpc::Status Prepare(const std::vector<drapb::Claim>& claims, drapb::NodePrepareResourcesResponse* response);
  grpc::Status Unprepare(const std::vector<drapb::Claim>& claims, drapb::NodeUnprepareResourcesResponse* response);

  // What the kubelet (ResourceHealthStatus) does with a driver that lists
  // "v1alpha1.DRAResourceHealth" among its supported versions: one NodeWatchResources stream on
  // its endpoint, read on a thread of its own. False with why when the driver does not list it.
  bool WatchHealth(std::string* error);
  using Clock = std::chrono::steady_clock;
  // When the stream first said `health` of `device` at or after `after` (and its message);
  // nullopt when it did not within `timeout_ms`.
  std::optional<Clock::time_point> WaitForHealth(const std::string& device, v1alpha1::HealthStatus health,
                                                 Clock::time_point after, int timeout_ms,
                                                 std::string* message = nullptr);
  // Every answer's problems against the API: a device of another pool, no check time or
  // timeout, a message over 1024 characters, a device missing from a later answer.
  std::vector<std::string> health_problems();
  size_t health_answers();

 private:
  struct HealthSeen {
    v1alpha1::HealthStatus health;
    std::string message;
    Clock::time_point at;
  };
  void ReadHealth(std::unique_ptr<grpc::ClientReader<v1alpha1::NodeWatchResourcesResponse>> reader);

  std::string registration_socket_;
  pluginregistration::PluginInfo info_;
  std::unique_ptr<drapb::DRAPlugin::Stub> stub_;
  std::unique_ptr<v1alpha1::DRAResourceHealth::Stub> health_stub_;
  std::unique_ptr<grpc::ClientContext> health_context_;
  std::thread health_reader_;
  std::mutex mutex_;
  std::condition_variable health_changed_;
  std::map<std::string, std::vector<HealthSeen>> health_;  // by device name, in order
  std::vector<std::string> health_problems_;
  size_t health_answers_ = 0;
};

drapb::Claim ClaimOf(const ClaimSpec& spec);

// A short temporary directory (unix socket paths are limited to 107 bytes) with registry/,
// cdi/, plugin/ and state/ in it.
std::string MakeDriverDir();
void RemoveDriverDir(const std::string& dir);

// gpuslice-dra-driver over the simulated NVML, node "node-a", talking to `api_url`, with quick
// retries (3 tries from 50 ms) and health polls (100 ms). Host and container paths are equal;
// the broker's state directory is `state_dir` (empty: <dir>/state). A flag in `extra_args`
// replaces its default.
std::unique_ptr<Subprocess> StartDriver(const std::string& dir, const std::string& api_url,
                                        std::vector<std::string> extra_args = {}, const std::string& state_dir = "");
std::string RegistrationSocket(const std::string& dir);

// A self-signed certificate for 127.0.0.1 (openssl): <prefix>.crt and <prefix>.key.
bool MakeCertificate(const std::string& prefix);

// tests/dra/dra_validate.py's verdict on `object` (kind: resourceslice or cdi): empty when valid.
std::string SchemaErrors(const std::string& kind, const nlohmann::json& object);

}  // namespace gpuslice::testing
