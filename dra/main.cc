// gpuslice-dra-driver: the node part of a DRA driver (docs/kubernetes.md, "The DRA driver").
// Publishes this node's GPUs and MIG instances as one ResourceSlice whose devices have
// consumable `memory` and `compute` capacities, taints a device that fails and lifts the taint
// when it recovers, streams every device's health to the kubelet, and prepares the kubelet's
// claims: a CDI spec that makes the container a gpuslice tenant of exactly the memory and
// compute the scheduler booked on that one device.
//
// Exit codes: 0 stopped by SIGTERM/SIGINT, 1 a runtime failure (NVML, sockets, checkpoint), 2 bad usage.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "common/node_daemon.h"
#include "common/version.h"
#include "dra/api_client.h"
#include "dra/claim_preparer.h"
#include "dra/device_health.h"
#include "dra/device_survey.h"
#include "dra/driver_directories.h"
#include "dra/health_service.h"
#include "dra/plugin_server.h"
#include "dra/resource_slice.h"
#include "gpu/gpu_inventory.h"

namespace gpuslice::dra {
namespace {

using node_daemon::Fail;

struct Flags {
  DriverConfig config;
  std::string kubeconfig, api_server, token_file, service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  int poll_ms = 5000, api_tries = 5, api_backoff_ms = 200;
};

void AddFlags(CLI::App& app, Flags* f) {
  DriverConfig& config = f->config;
  app.add_option("--driver-name", config.driver_name, "the DRA driver name")->capture_default_str();
  app.add_option("--node-name", config.node_name, "this node's name (the pool's name)")
      ->required()
      ->envname("NODE_NAME");
  app.add_option("--plugin-dir", config.plugin_dir, "the DRAPlugin socket and the checkpoint (created 0750 if missing)")
      ->required();
  app.add_option("--registry-dir", config.registry_dir, "the kubelet's plugins_registry")->capture_default_str();
  app.add_option("--cdi-dir", config.cdi_dir, "where CDI specs are written")->capture_default_str();
  app.add_option("--nvml-library", config.nvml_library, "libnvidia-ml.so.1 (a path or a name)")->capture_default_str();
  app.add_option("--library", config.host_library, "the host path of libgpuslice.so")->required();
  app.add_option("--container-library", config.container_library, "where containers see libgpuslice.so")
      ->capture_default_str();
  app.add_option("--state-dir", config.host_state_dir, "the host path of the broker's state directory")->required();
  app.add_option("--container-state-dir", config.container_state_dir, "where containers see it")->capture_default_str();
  app.add_option("--driver-limits-hook", config.driver_limits_hook,
                 "the host path of gpuslice-driver-limits: each prepared container's runtime runs it to set the "
                 "driver's memory limits (r615 or later) on the container's cgroup; empty: none");
  app.add_option("--hard-failure-taint", config.hard_failure_taint,
                 "the taint effect on a lost GPU, one that needs a reset or a critical XID: NoSchedule keeps new "
                 "claims off it, NoExecute also evicts the pods of its claims")
      ->capture_default_str()
      ->check(CLI::IsMember({"NoSchedule", "NoExecute"}));
  app.add_option("--kubeconfig", f->kubeconfig, "a kubeconfig (development); default: the pod's service account");
  app.add_option("--api-server", f->api_server, "the API server's URL, over the kubeconfig's or the pod's");
  app.add_option("--token-file", f->token_file, "a bearer token for --api-server");
  app.add_option("--service-account-dir", f->service_account_dir, "in a pod: the service account's token and ca.crt")
      ->capture_default_str();
  app.add_option("--poll-interval-ms", f->poll_ms, "how often device health is checked (and streamed to the kubelet)")
      ->capture_default_str()
      ->check(CLI::Range(10, 600000));
  app.add_option("--api-tries", f->api_tries, "tries per API call before an error")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--api-backoff-ms", f->api_backoff_ms, "the first retry's delay, doubled after each")
      ->capture_default_str()
      ->check(CLI::Range(1, 60000));
  config.registry_dir = "/var/lib/kubelet/plugins_registry";
  config.cdi_dir = "/var/run/cdi";
}

// The API server from the flags: --kubeconfig's, else the pod's service account (in a
// cluster) unless --api-server names one; --api-server and --token-file override what was found.
Result<ApiServer> ResolveApiServer(const Flags& f) {
  Result<ApiServer> found = ApiServer{};  // --api-server alone: its URL, and --token-file's token
  if (!f.kubeconfig.empty()) {
    found = KubeconfigApiServer(f.kubeconfig);
  } else if (f.api_server.empty()) {
    found = InClusterApiServer(f.service_account_dir);
  }
  if (!found.ok()) return found.status();
  ApiServer server = std::move(found).value();
  if (!f.api_server.empty()) server.url = f.api_server;
  if (!f.token_file.empty()) {
    std::ifstream in(f.token_file);
    if (!std::getline(in, server.token))
      return Status::InvalidArgument(fmt::format("gpuslice-dra-driver: cannot read --token-file {}", f.token_file));
  }
  return server;
}

int64_t UnixSeconds() { return static_cast<int64_t>(std::time(nullptr)); }

// What the slice says of the devices: their names and, for an unhealthy one, its taint.
std::string Signature(const std::vector<NodeDevice>& devices, const std::map<std::string, DeviceCondition>& health) {
  std::string s;
  for (const auto& d : devices) {
    const auto c = health.find(d.name);
    const bool tainted = c != health.end() && !c->second.healthy;
    fmt::format_to(std::back_inserter(s), "{}={}{}{};", d.name, d.gpu.uuid, tainted ? ":" : "",
                   tainted ? c->second.reason : "");
  }
  return s;
}

// Publish, then watch: a device failing or recovering, a slice the API server did not take, or
// a new registration by the kubelet publishes again (the next generation when the slice
// changed). XIDs reach the health (and so the stream) at once, the slice at the next poll.
int Serve(const Flags& f, const sigset_t& stop_signals, gpu::GpuInventory& inventory, DeviceSurvey survey,
          DeviceHealth& health, ClaimPreparer& preparer, PluginServer& plugin, ApiClient& api) {
  const std::string driver_version = inventory.DriverVersion();
  std::atomic<bool> stopping{false};
  std::thread xids([&] {
    while (!stopping) {
      for (const auto& e : inventory.WaitForXids(200)) {
        fmt::print(stderr, "gpuslice-dra-driver: XID {} on GPU {}{}\n", e.xid, e.index,
                   CriticalXid(e.xid) ? "" : " (an application error: the GPU stays healthy)");
        health.RecordXid(e.index, e.xid, UnixSeconds());
      }
    }
  });
  int64_t generation = 1;
  bool published = false;
  int registrations = 0;
  std::string signature = Signature(survey.devices, health.Conditions());
  for (;;) {
    if (plugin.registrations() != registrations) {  // a (re)started kubelet deleted the slice
      registrations = plugin.registrations();
      published = false;
    }
    if (!published) {
      const Status applied = api.ApplyResourceSlice(
          ResourceSliceJson(f.config, survey.devices, health.Conditions(), driver_version, generation));
      published = applied.ok();
      if (published) {
        fmt::print("published generation {}: {} devices\n", generation, survey.devices.size());
        std::fflush(stdout);
      } else {
        fmt::print(stderr, "{}\n", applied.message());
      }
    }
    const timespec wait = {f.poll_ms / 1000, (f.poll_ms % 1000) * 1000000L};
    if (sigtimedwait(&stop_signals, nullptr, &wait) > 0) break;
    Result<DeviceSurvey> now = SurveyDevices(inventory, survey.devices);
    if (!now.ok()) {
      fmt::print(stderr, "{}\n", now.message());
      continue;
    }
    health.Observe(now->devices, now->problems, UnixSeconds());
    const auto conditions = health.Conditions();
    if (Signature(now->devices, conditions) != signature) {  // said once per change, not once per poll
      fmt::print(stderr, "{}", now->left_out_lines);
      for (const auto& [name, c] : conditions)
        if (!c.healthy) fmt::print(stderr, "gpuslice-dra-driver: {} is unhealthy: {}\n", name, c.message);
      survey = std::move(now).value();
      signature = Signature(survey.devices, conditions);
      preparer.SetDevices(DevicesForClaims(survey, conditions));
      ++generation;
      published = false;
    }
  }
  stopping = true;
  health.Stop();
  xids.join();
  plugin.Stop();
  return 0;
}

int Run(int argc, char** argv) {
  CLI::App app{"gpuslice-dra-driver: the node part of gpuslice's DRA driver"};
  // Before the required options: CLI11 answers --version as soon as it reads it.
  app.set_version_flag("--version", "gpuslice-dra-driver " GPUSLICE_VERSION, "Print the version and exit");
  Flags f;
  AddFlags(app, &f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;  // --help and --version exit 0
  }
  Result<ApiServer> server = ResolveApiServer(f);
  if (!server.ok()) return Fail(kExitUsage, server.message());

  // Signals are waited for with sigtimedwait: blocked before any thread starts.
  const sigset_t stop_signals = node_daemon::BlockStopSignals();

  Result<std::unique_ptr<gpu::GpuInventory>> opened = gpu::GpuInventory::Open(f.config.nvml_library);
  if (!opened.ok()) return Fail(kExitFailure, fmt::format("gpuslice-dra-driver: --nvml-library: {}", opened.message()));
  std::unique_ptr<gpu::GpuInventory> inventory = std::move(opened).value();
  Result<DeviceSurvey> first = SurveyDevices(*inventory, {});
  if (!first.ok()) return Fail(kExitFailure, first.message());
  fmt::print(stderr, "{}", first->left_out_lines);
  if (Status watched = inventory->WatchXids(); !watched.ok())
    fmt::print(stderr, "gpuslice-dra-driver: {}\n", watched.message());
  DeviceHealth health;
  health.Observe(first->devices, first->problems, UnixSeconds());

  if (Status ready = PrepareDirectories(f.config); !ready.ok()) return Fail(kExitFailure, ready.message());
  ApiClient api(*server, {f.api_tries, std::chrono::milliseconds(f.api_backoff_ms)});
  ClaimPreparer preparer(f.config, &api);
  if (Status loaded = preparer.Load(); !loaded.ok()) return Fail(kExitFailure, loaded.message());
  preparer.SetDevices(DevicesForClaims(*first, health.Conditions()));
  fmt::print(stderr, "gpuslice-dra-driver: {} devices; {} claims prepared before this start\n", first->devices.size(),
             preparer.prepared());
  HealthService health_service(f.config.node_name, &health, std::chrono::milliseconds(f.poll_ms));
  PluginServer plugin(f.config, &preparer, &health_service);
  if (Status started = plugin.Start(); !started.ok()) return Fail(kExitFailure, started.message());
  fmt::print("serving {}\n", plugin.registration_socket());
  std::fflush(stdout);
  return Serve(f, stop_signals, *inventory, std::move(first).value(), health, preparer, plugin, api);
}

}  // namespace
}  // namespace gpuslice::dra

int main(int argc, char** argv) { return gpuslice::dra::Run(argc, argv); }
