#include "tests/dra/dra_stand_ins.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include <httplib.h>

#include "tests/support/test_env.h"

namespace gpuslice::testing {

namespace {

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";

nlohmann::json Status(int code, const std::string& reason, const std::string& message) {
  return {{"apiVersion", "v1"}, {"kind", "Status"}, {"status", "Failure"},
          {"code", code},       {"reason", reason}, {"message", message}};
}

void Answer(httplib::Response& res, int code, const nlohmann::json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

}  // namespace

std::string SchemaErrors(const std::string& kind, const nlohmann::json& object) {
  char path[] = "/tmp/gs-dra-object-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "mkstemp failed";
  close(fd);
  { std::ofstream(path) << object.dump(); }
  const auto result = Run({GPUSLICE_PYTHON, SourceDir() + "/tests/dra/dra_validate.py", kind, path});
  unlink(path);
  if (result.exit_code == 0) return "";
  return result.out + result.err +
         (result.out.empty() && result.err.empty() ? "exit " + std::to_string(result.exit_code) : "");
}

namespace {
std::unique_ptr<httplib::Server> MakeServer(const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty()) return std::make_unique<httplib::Server>();
  return std::make_unique<httplib::SSLServer>(cert_file.c_str(), key_file.c_str());
}
}  // namespace

bool MakeCertificate(const std::string& prefix) {
  return Run({"/usr/bin/env", "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
              "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", prefix + ".key", "-out",
              prefix + ".crt"})
             .exit_code == 0;
}

StandInApiServer::StandInApiServer(std::string token, int port, const std::string& cert_file,
                                   const std::string& key_file)
    : token_(std::move(token)), server_(MakeServer(cert_file, key_file)), tls_(!cert_file.empty()) {
  auto authorized = [this](const httplib::Request& req, httplib::Response& res) {
    if (token_.empty() || req.get_header_value("Authorization") == "Bearer " + token_) return true;
    Answer(res, 401, Status(401, "Unauthorized", "Unauthorized"));
    return false;
  };
  server_->Get(R"(/apis/resource.k8s.io/v1/namespaces/([^/]+)/resourceclaims/([^/]+))",
               [this, authorized](const httplib::Request& req, httplib::Response& res) {
                 if (!authorized(req, res)) return;
                 std::lock_guard<std::mutex> lock(mutex_);
                 ++claim_reads_;
                 const std::string key = std::string(req.matches[1]) + "/" + std::string(req.matches[2]);
                 auto it = claims_.find(key);
                 if (it == claims_.end()) {
                   Answer(res, 404,
                          Status(404, "NotFound",
                                 "resourceclaims.resource.k8s.io \"" + std::string(req.matches[2]) + "\" not found"));
                 } else {
                   Answer(res, 200, it->second);
                 }
               });
  // Create and replace: validated first, as the API server validates before storing.
  auto write = [this, authorized](const httplib::Request& req, httplib::Response& res, bool create) {
    if (!authorized(req, res)) return;
    const auto slice = nlohmann::json::parse(req.body, nullptr, false);
    std::string why;
    if (slice.is_discarded() || !Validate(slice, &why)) {
      std::lock_guard<std::mutex> lock(mutex_);
      refused_.push_back(slice.is_discarded() ? "not JSON" : why);
      changed_.notify_all();
      Answer(res, 422, Status(422, "Invalid", "ResourceSlice is invalid: " + why));
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string name = slice["metadata"]["name"];
    if (!create && name != std::string(req.matches[1])) {
      Answer(res, 400, Status(400, "BadRequest", "name in the body differs from the path"));
      return;
    }
    auto it = slices_.find(name);
    if (create && it != slices_.end()) {
      Answer(res, 409, Status(409, "AlreadyExists", "resourceslices.resource.k8s.io \"" + name + "\" already exists"));
      return;
    }
    if (!create) {
      if (it == slices_.end()) {
        Answer(res, 404, Status(404, "NotFound", "not found"));
        return;
      }
      if (slice["metadata"].value("resourceVersion", "") != it->second["metadata"]["resourceVersion"]) {
        Answer(res, 409, Status(409, "Conflict", "the object has been modified"));
        return;
      }
    }
    nlohmann::json stored = slice;
    stored["metadata"]["resourceVersion"] = std::to_string(++version_);
    slices_[name] = stored;
    accepted_.push_back(slice);
    changed_.notify_all();
    Answer(res, create ? 201 : 200, stored);
  };
  server_->Post(kSlices, [write](const httplib::Request& req, httplib::Response& res) { write(req, res, true); });
  server_->Put(std::string(kSlices) + "/([^/]+)",
               [write](const httplib::Request& req, httplib::Response& res) { write(req, res, false); });
  server_->Get(std::string(kSlices) + "/([^/]+)",
               [this, authorized](const httplib::Request& req, httplib::Response& res) {
                 if (!authorized(req, res)) return;
                 std::lock_guard<std::mutex> lock(mutex_);
                 auto it = slices_.find(req.matches[1]);
                 if (it == slices_.end()) {
                   Answer(res, 404, Status(404, "NotFound", "not found"));
                 } else {
                   Answer(res, 200, it->second);
                 }
               });
  if (port) {
    server_->bind_to_port("127.0.0.1", port);
    port_ = port;
  } else {
    port_ = server_->bind_to_any_port("127.0.0.1");
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // Running before the constructor returns: a Stop() before the loop started would not stop it
  // (httplib 0.11 has no wait_until_ready).
  for (int i = 0; i < 5000 && !server_->is_running(); ++i) usleep(1000);
}

StandInApiServer::~StandInApiServer() { Stop(); }

void StandInApiServer::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

std::string StandInApiServer::url() const {
  return (tls_ ? "https" : "http") + std::string("://127.0.0.1:") + std::to_string(port_);
}

bool StandInApiServer::Validate(const nlohmann::json& slice, std::string* why) {
  *why = SchemaErrors("resourceslice", slice);
  return why->empty();
}

void StandInApiServer::SetClaim(const nlohmann::json& claim) {
  std::lock_guard<std::mutex> lock(mutex_);
  claims_[claim["metadata"]["namespace"].get<std::string>() + "/" + claim["metadata"]["name"].get<std::string>()] =
      claim;
}

void StandInApiServer::DeleteSlices() {
  std::lock_guard<std::mutex> lock(mutex_);
  slices_.clear();
}

std::vector<nlohmann::json> StandInApiServer::accepted_slices() {
  std::lock_guard<std::mutex> lock(mutex_);
  return accepted_;
}

std::vector<std::string> StandInApiServer::refused_slices() {
  std::lock_guard<std::mutex> lock(mutex_);
  return refused_;
}

bool StandInApiServer::WaitForSlices(size_t count, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return accepted_.size() >= count; });
}

int StandInApiServer::claim_reads() {
  std::lock_guard<std::mutex> lock(mutex_);
  return claim_reads_;
}

std::string ShareIdOf(const ClaimSpec& spec) {
  if (spec.memory.empty() && spec.compute.empty()) return "";
  char tail[13];
  std::snprintf(tail, sizeof tail, "%012llx",
                static_cast<unsigned long long>(std::hash<std::string>{}(spec.uid) & 0xffffffffffffULL));
  return std::string("a1b2c3d4-0000-4000-8000-") + tail;  // a lowercase UUID, as the scheduler's
}

nlohmann::json MakeClaim(const ClaimSpec& spec) {
  nlohmann::json result = {{"request", spec.request},
                           {"driver", "gpu.gpuslice.io"},
                           {"pool", spec.node},
                           {"device", spec.device}};
  if (!spec.memory.empty()) result["consumedCapacity"]["memory"] = spec.memory;
  if (!spec.compute.empty()) result["consumedCapacity"]["compute"] = spec.compute;
  if (const std::string share = ShareIdOf(spec); !share.empty()) result["shareID"] = share;
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"namespace", spec.claim_namespace}, {"name", spec.name}, {"uid", spec.uid}}},
          {"spec",
           {{"devices", {{"requests", {{{"name", "gpu"}, {"exactly", {{"deviceClassName", "gpu.gpuslice.io"}}}}}}}}}},
          {"status", {{"allocation", {{"devices", {{"results", {result}}, {"config", spec.config}}}}}}}};
}

nlohmann::json OpaqueConfig(const std::string& source, const nlohmann::json& parameters) {
  return {{"source", source}, {"opaque", {{"driver", "gpu.gpuslice.io"}, {"parameters", parameters}}}};
}

StandInKubelet::StandInKubelet(std::string registration_socket)
    : registration_socket_(std::move(registration_socket)) {}

StandInKubelet::~StandInKubelet() {
  if (health_context_) health_context_->TryCancel();
  if (health_reader_.joinable()) health_reader_.join();
}

bool StandInKubelet::WatchHealth(std::string* error) {
  bool listed = false;
  for (const auto& v : info_.supported_versions()) listed |= v == "v1alpha1.DRAResourceHealth";
  if (!listed) {
    *error = "the driver does not list v1alpha1.DRAResourceHealth among its supported versions";
    return false;
  }
  health_stub_ = v1alpha1::DRAResourceHealth::NewStub(
      grpc::CreateChannel("unix://" + info_.endpoint(), grpc::InsecureChannelCredentials()));
  health_context_ = std::make_unique<grpc::ClientContext>();
  auto reader = health_stub_->NodeWatchResources(health_context_.get(), v1alpha1::NodeWatchResourcesRequest());
  health_reader_ = std::thread([this, r = std::move(reader)]() mutable { ReadHealth(std::move(r)); });
  return true;
}

void StandInKubelet::ReadHealth(std::unique_ptr<grpc::ClientReader<v1alpha1::NodeWatchResourcesResponse>> reader) {
  v1alpha1::NodeWatchResourcesResponse response;
  std::set<std::string> devices_before;
  while (reader->Read(&response)) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++health_answers_;
    std::set<std::string> devices;
    for (const auto& d : response.devices()) {
      const std::string& name = d.device().device_name();
      devices.insert(name);
      if (d.device().pool_name() != "node-a") health_problems_.push_back(name + ": pool " + d.device().pool_name());
      if (d.last_updated_time() <= 0) health_problems_.push_back(name + ": no last_updated_time");
      if (d.health_check_timeout_seconds() <= 0) health_problems_.push_back(name + ": no health_check_timeout_seconds");
      if (d.message().size() > 1024) health_problems_.push_back(name + ": a message over 1024 characters");
      auto& seen = health_[name];
      if (seen.empty() || seen.back().health != d.health() || seen.back().message != d.message())
        seen.push_back({d.health(), d.message(), Clock::now()});
    }
    // Every answer is the whole list: a device missing from it would turn Unknown.
    for (const auto& name : devices_before)
      if (!devices.count(name)) health_problems_.push_back(name + ": missing from a later answer");
    devices_before = devices;
    health_changed_.notify_all();
  }
  reader->Finish();
}

std::optional<StandInKubelet::Clock::time_point> StandInKubelet::WaitForHealth(const std::string& device,
                                                                               v1alpha1::HealthStatus health,
                                                                               Clock::time_point after, int timeout_ms,
                                                                               std::string* message) {
  std::unique_lock<std::mutex> lock(mutex_);
  std::optional<Clock::time_point> when;
  health_changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    for (const auto& s : health_[device]) {
      if (s.health == health && s.at >= after) {
        when = s.at;
        if (message) *message = s.message;
        return true;
      }
    }
    return false;
  });
  return when;
}

std::vector<std::string> StandInKubelet::health_problems() {
  std::lock_guard<std::mutex> lock(mutex_);
  return health_problems_;
}

size_t StandInKubelet::health_answers() {
  std::lock_guard<std::mutex> lock(mutex_);
  return health_answers_;
}

bool StandInKubelet::Register(std::string* error) {
  auto registration = pluginregistration::Registration::NewStub(
      grpc::CreateChannel("unix://" + registration_socket_, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));  // the kubelet's GetInfo timeout
    const auto status = registration->GetInfo(&context, pluginregistration::InfoRequest(), &info_);
    if (!status.ok()) {
      *error = "GetInfo: " + status.error_message();
      return false;
    }
  }
  bool v1 = false;
  for (const auto& v : info_.supported_versions()) v1 |= v == "v1.DRAPlugin";
  std::string refusal;
  if (info_.type() != "DRAPlugin") refusal = "type " + info_.type() + " is not DRAPlugin";
  if (!v1) refusal = "no supported version v1.DRAPlugin";
  if (refusal.empty()) {
    stub_ = drapb::DRAPlugin::NewStub(
        grpc::CreateChannel("unix://" + info_.endpoint(), grpc::InsecureChannelCredentials()));
  }
  pluginregistration::RegistrationStatus status;
  status.set_plugin_registered(refusal.empty());
  status.set_error(refusal);
  pluginregistration::RegistrationStatusResponse ignored;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  registration->NotifyRegistrationStatus(&context, status, &ignored);
  *error = refusal;
  return refusal.empty();
}

grpc::Status StandInKubelet::Prepare(const std::vector<drapb::Claim>& claims,
                                     drapb::NodePrepareResourcesResponse* response) {
  drapb::NodePrepareResourcesRequest request;
  for (const auto& c : claims) *request.add_claims() = c;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));  // the kubelet's
  return stub_->NodePrepareResources(&context, request, response);
}

grpc::Status StandInKubelet::Unprepare(const std::vector<drapb::Claim>& claims,
                                       drapb::NodeUnprepareResourcesResponse* response) {
  drapb::NodeUnprepareResourcesRequest request;
  for (const auto& c : claims) *request.add_claims() = c;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(45));
  return stub_->NodeUnprepareResources(&context, request, response);
}

drapb::Claim ClaimOf(const ClaimSpec& spec) {
  drapb::Claim claim;
  claim.set_namespace_(spec.claim_namespace);
  claim.set_name(spec.name);
  claim.set_uid(spec.uid);
  return claim;
}

std::string MakeDriverDir() {
  char templ[] = "/tmp/gs-dra-XXXXXX";
  if (!mkdtemp(templ)) return "";
  const std::string dir = templ;
  for (const char* sub : {"/registry", "/cdi", "/plugin", "/state"}) std::filesystem::create_directory(dir + sub);
  return dir;
}

void RemoveDriverDir(const std::string& dir) {
  std::error_code ignored;
  if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
}

std::string RegistrationSocket(const std::string& dir) { return dir + "/registry/gpu.gpuslice.io-reg.sock"; }

std::unique_ptr<Subprocess> StartDriver(const std::string& dir, const std::string& api_url,
                                        std::vector<std::string> extra_args, const std::string& state_dir) {
  const std::string state = state_dir.empty() ? dir + "/state" : state_dir;
  // Flag and value pairs; one named in extra_args replaces the default (the driver refuses a
  // flag given twice).
  std::vector<std::pair<std::string, std::string>> flags = {{"--node-name", "node-a"},
                                                            {"--plugin-dir", dir + "/plugin"},
                                                            {"--registry-dir", dir + "/registry"},
                                                            {"--cdi-dir", dir + "/cdi"},
                                                            {"--nvml-library", SimLibDir() + "/libnvidia-ml.so.1"},
                                                            {"--library", ShimPath()},
                                                            {"--container-library", ShimPath()},
                                                            {"--state-dir", state},
                                                            {"--container-state-dir", state},
                                                            {"--api-tries", "3"},
                                                            {"--api-backoff-ms", "50"},
                                                            {"--poll-interval-ms", "100"}};
  if (!api_url.empty()) flags.push_back({"--api-server", api_url});
  std::vector<std::string> argv = {BinDir() + "/gpuslice-dra-driver"};
  for (const auto& [flag, value] : flags) {
    if (std::find(extra_args.begin(), extra_args.end(), flag) == extra_args.end())
      argv.insert(argv.end(), {flag, value});
  }
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  return std::make_unique<Subprocess>(argv);
}

}  // namespace gpuslice::testing
