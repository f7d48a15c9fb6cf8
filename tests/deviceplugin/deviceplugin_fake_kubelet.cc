#include "tests/deviceplugin/deviceplugin_fake_kubelet.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "tests/support/test_env.h"

namespace gpuslice::testing {

class FakeKubelet::Service final : public v1beta1::Registration::Service {
 public:
  Service(std::string dir) : dir_(std::move(dir)), started_(std::chrono::steady_clock::now()) {}

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request, v1beta1::Empty*) override {
    Registration r;
    r.request = *request;
    r.seconds_since_start = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    // As the kubelet does next: dial the endpoint. It must already be serving.
    auto stub = v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix://" + dir_ + "/" + request->endpoint(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1beta1::DevicePluginOptions options;
    r.endpoint_was_serving = stub->GetDevicePluginOptions(&context, v1beta1::Empty(), &options).ok();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      registrations_.push_back(r);
    }
    arrived_.notify_all();
    if (request->version() != "v1beta1")
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unsupported version " + request->version());
    return grpc::Status::OK;
  }

  std::string dir_;
  std::chrono::steady_clock::time_point started_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<Registration> registrations_;
};

FakeKubelet::FakeKubelet(std::string dir) : dir_(std::move(dir)) {}
FakeKubelet::~FakeKubelet() { Stop(); }

void FakeKubelet::Start() {
  Stop();
  service_ = std::make_unique<Service>(dir_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
}

void FakeKubelet::Stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server_.reset();
  unlink((dir_ + "/kubelet.sock").c_str());
}

void FakeKubelet::DeleteSockets() {
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    if (entry.path().extension() == ".sock") std::filesystem::remove(entry.path());
  }
}

bool FakeKubelet::WaitForRegistrations(size_t count, int timeout_ms) {
  std::unique_lock<std::mutex> lock(service_->mutex_);
  return service_->arrived_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                                     [&] { return service_->registrations_.size() >= count; });
}

std::vector<Registration> FakeKubelet::registrations() {
  std::lock_guard<std::mutex> lock(service_->mutex_);
  return service_->registrations_;
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> FakeKubelet::Connect(const std::string& resource) {
  for (const Registration& r : registrations()) {
    if (r.request.resource_name() != resource) continue;
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix://" + dir_ + "/" + r.request.endpoint(), grpc::InsecureChannelCredentials()));
  }
  return nullptr;
}

class FakePodResources::Service final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    std::lock_guard<std::mutex> lock(mutex);
    *out = pods;
    ++lists;
    return grpc::Status::OK;
  }
  std::mutex mutex;
  v1::ListPodResourcesResponse pods;
  int lists = 0;
};

FakePodResources::FakePodResources(std::string socket_path)
    : socket_path_(std::move(socket_path)), service_(std::make_unique<Service>()) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + socket_path_, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
}

FakePodResources::~FakePodResources() {
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  unlink(socket_path_.c_str());
}

void FakePodResources::Set(v1::ListPodResourcesResponse pods) {
  std::lock_guard<std::mutex> lock(service_->mutex);
  service_->pods = std::move(pods);
}

int FakePodResources::lists() {
  std::lock_guard<std::mutex> lock(service_->mutex);
  return service_->lists;
}

std::string MakePluginDir() {
  char pattern[] = "/tmp/gsdp-XXXXXX";
  const char* dir = mkdtemp(pattern);
  if (dir == nullptr) return "";
  std::filesystem::create_directory(std::string(dir) + "/state");
  return dir;
}

void RemovePluginDir(const std::string& dir) {
  std::error_code ignored;
  if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
}

std::unique_ptr<Subprocess> StartPlugin(const std::string& dir, std::vector<std::string> extra_args) {
  std::vector<std::string> argv = {BinDir() + "/gpuslice-device-plugin",
                                   "--plugin-dir",
                                   dir,
                                   "--library",
                                   ShimPath(),
                                   "--state-dir",
                                   dir + "/state",
                                   "--nvml-library",
                                   SimLibDir() + "/libnvidia-ml.so.1",
                                   "--pod-resources-socket",
                                   "",  // a test that wants one names it
                                   "--pods-file",
                                   dir + "/pods.json"};  // TestPodsFile(dir + "/state")
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  return std::make_unique<Subprocess>(argv);
}

std::vector<v1beta1::Device> FirstList(v1beta1::DevicePlugin::Stub& stub) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto reader = stub.ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse response;
  std::vector<v1beta1::Device> devices;
  if (reader->Read(&response)) devices.assign(response.devices().begin(), response.devices().end());
  context.TryCancel();
  reader->Finish();
  return devices;
}

}  // namespace gpuslice::testing
