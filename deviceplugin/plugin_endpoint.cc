#include "deviceplugin/plugin_endpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include <fmt/format.h>

namespace gpuslice::deviceplugin {
namespace {

constexpr char kApiVersion[] = "v1beta1";
constexpr char kKubeletSocket[] = "kubelet.sock";
constexpr auto kRegisterTimeout = std::chrono::seconds(5);
// A ListAndWatch stream notices the end within its poll period; give it that and some.
constexpr auto kShutdownGrace = std::chrono::milliseconds(500);

ino_t InodeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

PluginEndpoint::PluginEndpoint(const DeviceCatalog& catalog, const PluginConfig& config, SliceRequests* requests)
    : catalog_(catalog), config_(config), requests_(requests) {
  resource_ = config.resource;
  // "gpuslice.io/gpu" -> "gpuslice.io-gpu.sock".
  std::string name = resource_;
  for (char& c : name) c = c == '/' ? '-' : c;
  socket_name_ = fmt::format("{}.sock", name);
  socket_path_ = fmt::format("{}/{}", config.plugin_dir, socket_name_);
}

PluginEndpoint::~PluginEndpoint() { Stop(); }

Status PluginEndpoint::Serve() {
  Stop();
  unlink(socket_path_.c_str());  // a stale socket of an earlier run refuses the bind
  service_ = std::make_unique<DevicePluginService>(catalog_, config_, requests_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(fmt::format("unix://{}", socket_path_), grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_) {
    service_.reset();
    return Status::Error(fmt::format("gpuslice-device-plugin: cannot serve on {}", socket_path_));
  }
  socket_inode_ = InodeOf(socket_path_);
  return Status::Ok();
}

Status PluginEndpoint::Register() {
  auto channel = grpc::CreateChannel(fmt::format("unix://{}/{}", config_.plugin_dir, kKubeletSocket),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version(kApiVersion);
  request.set_endpoint(socket_name_);
  request.set_resource_name(resource_);
  request.mutable_options()->set_get_preferred_allocation_available(true);
  v1beta1::Empty reply;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kRegisterTimeout);
  const grpc::Status status = stub->Register(&context, request, &reply);
  if (status.ok()) return Status::Ok();
  return Status::Unavailable(fmt::format("gpuslice-device-plugin: Register of {} with the kubelet failed: {}",
                                         resource_, status.error_message()));
}

void PluginEndpoint::Stop() {
  if (!server_) return;
  service_->EndStreams();
  server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server_->Wait();
  server_.reset();
  service_.reset();
  if (SocketIntact()) unlink(socket_path_.c_str());
  socket_inode_ = 0;
}

bool PluginEndpoint::SocketIntact() const { return socket_inode_ != 0 && InodeOf(socket_path_) == socket_inode_; }

}  // namespace gpuslice::deviceplugin
