// gpuslice-dra-driver: the node part of a DRA driver (docs/kubernetes.md, "The DRA driver").
// Publishes this node's GPUs and MIG instances as one ResourceSlice whose devices have
// consumable `memory` and `compute` capacities, republishes when a device is lost or comes
// back, and prepares the kubelet's claims: a CDI spec that makes the container a gpuslice
// tenant of exactly the memory and compute the scheduler booked on that one device.
//
// Exit codes: 0 stopped by SIGTERM/SIGINT, 1 a runtime failure (NVML, sockets, checkpoint), 2 bad usage.
#include <signal.h>

#include <cstdio>
#include <ctime>
#include <fstream>

#include <CLI/CLI.hpp>

#include "common/node_daemon.h"
#include "common/version.h"
#include "deviceplugin/gpu_inventory.h"
#include "dra/api_client.h"
#include "dra/claim_preparer.h"
#include "dra/driver_directories.h"
#include "dra/driver_version.h"
#include "dra/plugin_server.h"
#include "dra/resource_slice.h"

namespace gpuslice::dra {
namespace {

using node_daemon::Fail;
using node_daemon::kExitFailure;
using node_daemon::kExitUsage;

// The devices to publish: those NVML lists and that still answer as healthy (a GPU lost
// since the last look may still be listed), and one line per GPU left out.
struct HealthyDevices {
  std::vector<NodeDevice> devices;
  std::string left_out_lines;
};

Result<HealthyDevices> FindHealthyDevices(deviceplugin::GpuInventory& inventory) {
  const Result<deviceplugin::Discovery> discovered = inventory.Discover();
  if (!discovered.ok()) return discovered.status();
  HealthyDevices found;
  std::vector<deviceplugin::GpuInfo> healthy;
  for (const auto& l : discovered->left_out)
    found.left_out_lines += "gpuslice-dra-driver: GPU " + std::to_string(l.index) + " left out: " + l.reason + "\n";
  for (const auto& gpu : discovered->gpus) {
    if (inventory.Healthy(gpu)) {
      healthy.push_back(gpu);
    } else {
      found.left_out_lines += "gpuslice-dra-driver: " + gpu.uuid + " left out: it no longer answers NVML\n";
    }
  }
  found.devices = NameDevices(healthy);
  return found;
}

std::string Signature(const std::vector<NodeDevice>& devices) {
  std::string s;
  for (const auto& d : devices) s += d.name + "=" + d.gpu.uuid + ";";
  return s;
}

// The API server from the flags: --kubeconfig's, else the pod's service account (in a
// cluster) unless --api-server names one; --api-server and --token-file override what was found.
Result<ApiServer> ResolveApiServer(const std::string& kubeconfig, const std::string& api_server,
                                   const std::string& token_file, const std::string& service_account_dir) {
  Result<ApiServer> found = ApiServer{};  // --api-server alone: its URL, and --token-file's token
  if (!kubeconfig.empty()) {
    found = KubeconfigApiServer(kubeconfig);
  } else if (api_server.empty()) {
    found = InClusterApiServer(service_account_dir);
  }
  if (!found.ok()) return found.status();
  ApiServer server = std::move(found).value();
  if (!api_server.empty()) server.url = api_server;
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!std::getline(in, server.token))
      return Status::InvalidArgument("gpuslice-dra-driver: cannot read --token-file " + token_file);
  }
  return server;
}

int Run(int argc, char** argv) {
  CLI::App app{"gpuslice-dra-driver: the node part of gpuslice's DRA driver"};
  // Before the required options: CLI11 answers --version as soon as it reads it.
  app.set_version_flag("--version", "gpuslice-dra-driver " GPUSLICE_VERSION, "Print the version and exit");
  DriverConfig config;
  std::string kubeconfig, api_server, token_file, service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  int poll_ms = 5000, api_tries = 5, api_backoff_ms = 200;
  app.add_option("--driver-name", config.driver_name, "the DRA driver name")->capture_default_str();
  app.add_option("--node-name", config.node_name, "this node's name (the pool's name)")
      ->required()
      ->envname("NODE_NAME");
  app.add_option("--plugin-dir", config.plugin_dir, "the DRAPlugin socket and the checkpoint")->required();
  app.add_option("--registry-dir", config.registry_dir, "the kubelet's plugins_registry")->capture_default_str();
  app.add_option("--cdi-dir", config.cdi_dir, "where CDI specs are written")->capture_default_str();
  app.add_option("--nvml-library", config.nvml_library, "libnvidia-ml.so.1 (a path or a name)")->capture_default_str();
  app.add_option("--library", config.host_library, "the host path of libgpuslice.so")->required();
  app.add_option("--container-library", config.container_library, "where containers see libgpuslice.so")
      ->capture_default_str();
  app.add_option("--state-dir", config.host_state_dir, "the host path of the broker's state directory")->required();
  app.add_option("--container-state-dir", config.container_state_dir, "where containers see it")->capture_default_str();
  app.add_option("--kubeconfig", kubeconfig, "a kubeconfig (development); default: the pod's service account");
  app.add_option("--api-server", api_server, "the API server's URL, over the kubeconfig's or the pod's");
  app.add_option("--token-file", token_file, "a bearer token for --api-server");
  app.add_option("--service-account-dir", service_account_dir, "in a pod: the service account's token and ca.crt")
      ->capture_default_str();
  app.add_option("--poll-interval-ms", poll_ms, "how often device health is checked")
      ->capture_default_str()
      ->check(CLI::Range(10, 600000));
  app.add_option("--api-tries", api_tries, "tries per API call before an error")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--api-backoff-ms", api_backoff_ms, "the first retry's delay, doubled after each")
      ->capture_default_str()
      ->check(CLI::Range(1, 60000));
  config.registry_dir = "/var/lib/kubelet/plugins_registry";
  config.cdi_dir = "/var/run/cdi";
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  Result<ApiServer> found = ResolveApiServer(kubeconfig, api_server, token_file, service_account_dir);
  if (!found.ok()) return Fail(kExitUsage, found.message());
  ApiServer server = std::move(found).value();

  // Signals are waited for with sigtimedwait: blocked before any thread starts.
  const sigset_t stop_signals = node_daemon::BlockStopSignals();

  Result<std::unique_ptr<deviceplugin::GpuInventory>> opened = deviceplugin::GpuInventory::Open(config.nvml_library);
  if (!opened.ok()) return Fail(kExitFailure, opened.message());
  std::unique_ptr<deviceplugin::GpuInventory> inventory = std::move(opened).value();
  const std::string driver_version = NvmlDriverVersion(config.nvml_library);
  Result<HealthyDevices> first = FindHealthyDevices(*inventory);
  if (!first.ok()) return Fail(kExitFailure, first.message());
  std::fputs(first->left_out_lines.c_str(), stderr);
  std::vector<NodeDevice> devices = std::move(first->devices);

  if (Status ready = PrepareDirectories(config); !ready.ok()) return Fail(kExitFailure, ready.message());
  ApiClient api(server, {api_tries, std::chrono::milliseconds(api_backoff_ms)});
  ClaimPreparer preparer(config, &api);
  if (Status loaded = preparer.Load(); !loaded.ok()) return Fail(kExitFailure, loaded.message());
  preparer.SetDevices(devices);
  std::fprintf(stderr, "gpuslice-dra-driver: %zu devices; %zu claims prepared before this start\n", devices.size(),
               preparer.prepared());
  PluginServer plugin(config, &preparer);
  if (Status started = plugin.Start(); !started.ok()) return Fail(kExitFailure, started.message());
  std::printf("serving %s\n", plugin.registration_socket().c_str());
  std::fflush(stdout);

  // Publish, then watch: a device lost or back, a slice the API server did not take, or a new
  // registration by the kubelet publishes again (the next generation when the devices changed).
  int64_t generation = 1;
  bool published = false;
  int registrations = 0;
  std::string signature = Signature(devices);
  for (;;) {
    if (plugin.registrations() != registrations) {  // a (re)started kubelet deleted the slice
      registrations = plugin.registrations();
      published = false;
    }
    if (!published) {
      const auto slice = ResourceSliceJson(config, devices, driver_version, generation);
      const Status applied = api.ApplyResourceSlice(slice);
      published = applied.ok();
      if (published) {
        std::printf("published generation %lld: %zu devices\n", static_cast<long long>(generation), devices.size());
        std::fflush(stdout);
      } else {
        std::fprintf(stderr, "%s\n", applied.message().c_str());
      }
    }
    const timespec wait = {poll_ms / 1000, (poll_ms % 1000) * 1000000L};
    if (sigtimedwait(&stop_signals, nullptr, &wait) > 0) break;
    Result<HealthyDevices> now = FindHealthyDevices(*inventory);
    if (!now.ok()) {
      std::fprintf(stderr, "%s\n", now.message().c_str());
      continue;
    }
    if (Signature(now->devices) != signature) {  // said once per change, not once per poll
      std::fputs(now->left_out_lines.c_str(), stderr);
      devices = std::move(now->devices);
      signature = Signature(devices);
      preparer.SetDevices(devices);
      ++generation;
      published = false;
    }
  }
  plugin.Stop();
  return 0;
}

}  // namespace
}  // namespace gpuslice::dra

int main(int argc, char** argv) { return gpuslice::dra::Run(argc, argv); }
