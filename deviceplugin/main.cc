// gpuslice-device-plugin: advertises gpuslice.io/gpu (slicesPerGpu IDs per GPU or MIG instance,
// each 1/slicesPerGpu of its memory and of its time) to the kubelet, and answers Allocate with
// the environment and mounts that make the container a gpuslice tenant of exactly that slice of
// that one device. docs/kubernetes.md is the user's guide.
//
// Exit codes: 0 stopped by SIGTERM/SIGINT, 1 a runtime failure (NVML, socket), 2 bad usage or
// configuration.
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/cond_var.h"
#include "common/mutex.h"
#include "common/mutex_lock.h"
#include "common/node_daemon.h"
#include "common/thread_annotations.h"
#include "common/version.h"
#include "deviceplugin/container_allocation.h"
#include "deviceplugin/device_catalog.h"
#include "deviceplugin/device_plugin_service.h"
#include "deviceplugin/kubelet_watch.h"
#include "deviceplugin/plugin_config.h"
#include "deviceplugin/plugin_endpoint.h"
#include "deviceplugin/pod_resources_watch.h"
#include "gpu/gpu_inventory.h"

namespace gpuslice::deviceplugin {
namespace {

using gpu::Discovery;
using gpu::GpuInfo;
using gpu::GpuInventory;
using gpu::LeftOutGpu;
using node_daemon::Fail;

// "unitSize" -> "unit-size".
std::string FlagName(const std::string& key) {
  std::string flag;
  for (char c : key) {
    if (c >= 'A' && c <= 'Z') {
      flag += '-';
      flag += static_cast<char>(c - 'A' + 'a');
    } else {
      flag += c;
    }
  }
  return flag;
}

// Keeps only the GPUs named in `devices` (UUIDs or NVML indices of GPUs, or MIG instance UUIDs),
// in NVML order. A GPU in MIG mode named by its index or UUID keeps all its instances.
Status SelectGpus(const std::vector<std::string>& devices, std::vector<GpuInfo>* gpus) {
  if (devices.empty()) return Status::Ok();
  std::vector<bool> keep(gpus->size(), false);
  for (const std::string& wanted : devices) {
    bool found = false;
    for (size_t p = 0; p < gpus->size(); ++p) {
      const GpuInfo& g = (*gpus)[p];
      if (g.uuid == wanted || g.parent_uuid == wanted || fmt::to_string(g.index) == wanted) keep[p] = found = true;
    }
    if (!found) {
      std::vector<std::string> known;
      for (const GpuInfo& g : *gpus) known.push_back(fmt::format("{} {}", g.index, g.uuid));
      return Status::InvalidArgument(
          fmt::format("gpuslice-device-plugin: devices names '{}', which NVML does not list; the GPUs are {}", wanted,
                      fmt::join(known, ", ")));
    }
  }
  std::vector<GpuInfo> kept;
  for (size_t p = 0; p < gpus->size(); ++p) {
    if (keep[p]) kept.push_back((*gpus)[p]);
  }
  *gpus = std::move(kept);
  return Status::Ok();
}

// Polls NVML for each GPU's health until stopped; a change reaches ListAndWatch at once.
class HealthMonitor {
 public:
  HealthMonitor(GpuInventory& inventory, DeviceCatalog& catalog, int interval_ms)
      : thread_([this, &inventory, &catalog, interval_ms] {
          // The first poll at once, then one every interval_ms until stopped.
          for (int wait_ms = 0; !StopAsked(wait_ms); wait_ms = interval_ms) {
            for (size_t p = 0; p < catalog.gpus().size(); ++p) {
              const bool healthy = inventory.Healthy(catalog.gpus()[p]);
              if (healthy != catalog.Health().healthy[p]) {
                fmt::print(stderr, "gpuslice-device-plugin: GPU {} {} is {}\n", catalog.gpus()[p].index,
                           catalog.gpus()[p].uuid, healthy ? "healthy again" : "unhealthy");
              }
              catalog.SetHealthy(p, healthy);
            }
          }
        }) {}
  ~HealthMonitor() {
    {
      MutexLock lock(&mutex_);
      stop_ = true;
    }
    wake_.SignalAll();
    thread_.join();
  }

 private:
  // True once the destructor asks the thread to stop; waits up to `wait_ms` for it.
  bool StopAsked(int wait_ms) EXCLUDES(mutex_) {
    MutexLock lock(&mutex_);
    return wake_.WaitFor(&mutex_, std::chrono::milliseconds(wait_ms), [this]() REQUIRES(mutex_) { return stop_; });
  }

  Mutex mutex_;
  CondVar wake_;
  bool stop_ GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

// What start serves: NVML, and the GPUs (and instances) of the node the configuration keeps.
struct Prepared {
  std::unique_ptr<GpuInventory> inventory;
  std::vector<GpuInfo> gpus;
};

// Everything start checks before serving, in order: the host's paths, NVML, the devices it
// lists (a GPU that does not answer is left out with a line, the others served), `devices`,
// and what the configuration makes of them (the ListAndWatch answer's size, a slice's memory).
// An error with one line: InvalidArgument for a bad configuration (exit 2), another code when
// NVML or the devices fail (exit 1).
Result<Prepared> Prepare(const PluginConfig& config) {
  if (Status valid = ValidateConfig(config); !valid.ok()) return Status::InvalidArgument(valid.message());
  Result<std::unique_ptr<GpuInventory>> opened = GpuInventory::Open(config.nvml_library);
  if (!opened.ok()) return Status::Error(fmt::format("gpuslice-device-plugin: nvmlLibrary: {}", opened.message()));
  Prepared prepared{std::move(opened).value(), {}};
  Result<Discovery> discovered = prepared.inventory->Discover();
  if (!discovered.ok()) return Status::Error(fmt::format("gpuslice-device-plugin: {}", discovered.message()));
  const std::vector<LeftOutGpu>& left_out = discovered->left_out;
  for (const LeftOutGpu& gpu : left_out)
    fmt::print(
        stderr,
        "gpuslice-device-plugin: GPU {} left out: {}; the others are served (restart the plugin once it is back)\n",
        gpu.index, gpu.reason);
  std::vector<GpuInfo>& gpus = prepared.gpus;
  gpus = std::move(discovered->gpus);
  if (Status selected = SelectGpus(config.devices, &gpus); !selected.ok()) return selected;
  if (gpus.empty()) {
    return Status::Error(
        left_out.empty()
            ? "gpuslice-device-plugin: NVML lists no GPU on this node (or only GPUs in MIG mode with no instance)"
            : fmt::format("gpuslice-device-plugin: no GPU answers NVML ({} left out)", left_out.size()));
  }
  const DeviceCatalog catalog(gpus, config.slices_per_gpu);
  for (size_t p = 0; p < gpus.size(); ++p) {
    if (catalog.SliceBytes(p) == 0) {
      return Status::InvalidArgument(fmt::format(
          "gpuslice-device-plugin: slicesPerGpu {} leaves {} ({} MiB) less than 1 MiB per slice; use fewer slices",
          config.slices_per_gpu, catalog.Describe(p), gpus[p].total_memory >> 20));
    }
  }
  if (const size_t bytes = ListBytes(catalog); bytes > kMaxListBytes) {
    return Status::InvalidArgument(fmt::format(
        "gpuslice-device-plugin: {} devices of {} slices make a ListAndWatch answer of {} bytes, over the {} this plugin sends (the kubelet reads at most 4 MiB); use fewer slicesPerGpu or name fewer devices",
        gpus.size(), config.slices_per_gpu, bytes, kMaxListBytes));
  }
  return prepared;
}

int Main(int argc, char** argv) {
  // What it writes for others to read (the pods file, ld.so.preload) is never writable by others,
  // whatever umask its container starts with: readers refuse a pods file others may write.
  umask(022);
  CLI::App app{
      "gpuslice-device-plugin: a Kubernetes device plugin that turns gpuslice.io/gpu requests into "
      "gpuslice slices of one GPU's memory and time (docs/kubernetes.md)"};
  app.set_version_flag("--version", "gpuslice-device-plugin " GPUSLICE_VERSION, "Print the version and exit");
  std::string config_file;
  app.add_option("--config", config_file, "YAML file of the keys below (flags override it)");
  bool check_config = false;
  app.add_flag("--check-config", check_config,
               "run every check start runs (keys, the host's paths, NVML, the devices) and exit: 0 when valid, "
               "2 with the error line for a bad configuration, 1 when NVML or the devices fail");
  std::map<std::string, std::string> flag_values;
  std::map<std::string, CLI::Option*> flags;
  for (const std::string& key : ConfigKeys())
    flags[key] = app.add_option(fmt::format("--{}", FlagName(key)), flag_values[key], fmt::format("config key {}", key))
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }

  PluginConfig config;
  if (!config_file.empty()) {
    if (Status loaded = LoadConfigFile(config_file, &config); !loaded.ok()) return Fail(kExitUsage, loaded.message());
  }
  for (const std::string& key : ConfigKeys()) {
    if (flags[key]->count() == 0) continue;
    if (Status set = SetConfigValue(key, flag_values[key], fmt::format("--{}", FlagName(key)), &config); !set.ok())
      return Fail(kExitUsage, set.message());
  }
  // Signals are taken through a signalfd: blocked here, before any thread starts (NVML's
  // own among them).
  const sigset_t stop_signals = node_daemon::BlockStopSignals();
  const int stop_fd = signalfd(-1, &stop_signals, SFD_CLOEXEC);
  if (stop_fd < 0) return Fail(kExitFailure, "gpuslice-device-plugin: signalfd failed");
  // --check-config runs every check start runs (the file, the host's paths, NVML and what the
  // devices make of the configuration) and stops before serving.
  Result<Prepared> prepared = Prepare(config);
  if (!prepared.ok()) {
    return Fail(prepared.status().code() == Status::Code::kInvalidArgument ? kExitUsage : kExitFailure,
                prepared.message());
  }
  std::unique_ptr<GpuInventory> inventory = std::move(prepared->inventory);
  const std::vector<GpuInfo> gpus = std::move(prepared->gpus);
  if (check_config) {
    fmt::print(
        "gpuslice-device-plugin: configuration valid: {} devices of {} slices, a ListAndWatch answer of {} bytes\n",
        gpus.size(), config.slices_per_gpu, ListBytes(DeviceCatalog(gpus, config.slices_per_gpu)));
    return 0;
  }
  if (config.preload == PreloadMode::kLdSoPreload) {
    if (Status written = WriteLdSoPreloadFile(config); !written.ok()) return Fail(kExitFailure, written.message());
  }

  DeviceCatalog catalog(gpus, config.slices_per_gpu);
  for (size_t p = 0; p < gpus.size(); ++p) {
    const std::string where = gpus[p].mig_index < 0 ? "" : fmt::format(" (MIG instance of {})", gpus[p].parent_uuid);
    const std::string numa = gpus[p].numa_node ? fmt::format(", NUMA node {}", *gpus[p].numa_node) : "";
    fmt::print(stderr, "gpuslice-device-plugin: GPU {} {} {}{}: {} slices of {} MiB and {}% of its time{}\n",
               gpus[p].index, gpus[p].uuid, gpus[p].name, where, config.slices_per_gpu, catalog.SliceBytes(p) >> 20,
               catalog.PercentPerSlice(), numa);
  }
  int status = 0;
  {
    HealthMonitor health(*inventory, catalog, config.health_interval_ms);
    // Allocate holds each container's memory request; only the pod-resources watch can tell when
    // the pod is gone and release it (deviceplugin/slice_requests.h).
    std::unique_ptr<SliceRequests> requests =
        config.pod_resources_socket.empty() ? nullptr : std::make_unique<SliceRequests>(config.host_state_dir);
    PodResourcesWatch pods(config, 2000, requests.get());
    PluginEndpoint endpoint(catalog, config, requests.get());
    KubeletWatch watch(config.plugin_dir, {&endpoint});
    if (Status ran = watch.Run(stop_fd); !ran.ok()) status = Fail(kExitFailure, ran.message());
    catalog.Stop();  // ends the ListAndWatch streams, then the servers stop
  }
  if (status == 0) fmt::print(stderr, "gpuslice-device-plugin: stopped\n");
  return status;
}

}  // namespace
}  // namespace gpuslice::deviceplugin

int main(int argc, char** argv) { return gpuslice::deviceplugin::Main(argc, argv); }
