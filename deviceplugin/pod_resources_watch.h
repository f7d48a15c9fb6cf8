// Names each tenant after its pod. Every few seconds the plugin asks the kubelet's pod-resources
// API (List) which pod, namespace and container hold which of its slice IDs, derives each
// container's tenant name from those IDs exactly as Allocate did (TenantNameForIds), and writes
// the map to <stateDir>/pods.json, which gpuslicectl and the exporter read. The file is replaced
// atomically (a reader sees the old map or the new one) and only when it changes.
#pragma once

#include <map>
#include <string>
#include <thread>

#include "common/cond_var.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "deviceplugin/plugin_config.h"

namespace gpuslice::deviceplugin {

struct PodOfTenant {
  std::string namespace_name;
  std::string pod;
  std::string container;
  std::string devices;  // the UUIDs its slices are on
  int slices = 0;
};

// The file's name in the state directory.
inline constexpr char kPodsFileName[] = "pods.json";

// One List against `socket`: tenant name -> pod, for the containers holding `resource`. An
// Unavailable error with one line when the kubelet does not answer.
Result<std::map<std::string, PodOfTenant>> ListTenantPods(const std::string& socket, const std::string& resource,
                                                          int timeout_ms);

// Writes the map as JSON to `path` (through a temporary file and rename).
Status WritePodsFile(const std::string& path, const std::map<std::string, PodOfTenant>& pods);

class PodResourcesWatch {
 public:
  // Polls every `interval_ms` until destroyed; does nothing when config.pod_resources_socket is
  // empty. A kubelet that does not answer is logged once (and once more when it answers again).
  explicit PodResourcesWatch(const PluginConfig& config, int interval_ms = 2000);
  ~PodResourcesWatch();
  PodResourcesWatch(const PodResourcesWatch&) = delete;
  PodResourcesWatch& operator=(const PodResourcesWatch&) = delete;

 private:
  void Poll(const PluginConfig& config);
  // True once the destructor asks the thread to stop; waits up to `wait_ms` for it.
  bool StopAsked(int wait_ms) EXCLUDES(mutex_);

  Mutex mutex_;
  CondVar wake_;
  bool stop_ GUARDED_BY(mutex_) = false;
  // The polling thread's own (Poll runs without the mutex).
  bool failing_ = false;
  std::map<std::string, PodOfTenant> written_;
  bool written_once_ = false;
  std::thread thread_;
};

}  // namespace gpuslice::deviceplugin
