// Names each tenant after its pod. Every few seconds the plugin asks the kubelet's pod-resources
// API (List) which pod, namespace and container hold which of its slice IDs, derives each
// container's tenant name from those IDs exactly as Allocate did (TenantNameForIds), and writes
// the map to the pods file (podsFile, common/pod_names.h), which gpuslicectl and the exporter
// read. The file is replaced atomically (a reader sees the old map or the new one) and only when
// it changes.
#pragma once

#include <map>
#include <string>
#include <thread>

#include "common/cond_var.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "deviceplugin/plugin_config.h"
#include "deviceplugin/pod_resources_names.h"
#include "deviceplugin/slice_requests.h"

namespace gpuslice::deviceplugin {

// One List against `socket`: tenant name -> pod, for the containers holding `resource`
// (TenantPodsOf; *dropped counts the containers left out). An Unavailable error with one line
// when the kubelet does not answer.
Result<std::map<std::string, PodOfTenant>> ListTenantPods(const std::string& socket, const std::string& resource,
                                                          int timeout_ms, size_t* dropped);

// Writes PodsFileText(pods) to `path` (through a temporary file and rename); *dropped counts the
// entries left out to keep it within the readers' bounds.
Status WritePodsFile(const std::string& path, const std::map<std::string, PodOfTenant>& pods, size_t* dropped);

class PodResourcesWatch {
 public:
  // Polls every `interval_ms` until destroyed; does nothing when config.pod_resources_socket is
  // empty. A kubelet that does not answer is logged once (and once more when it answers again).
  // After each complete List, `requests` (may be null) withdraws the requests of pods gone.
  explicit PodResourcesWatch(const PluginConfig& config, int interval_ms = 2000, SliceRequests* requests = nullptr);
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
  SliceRequests* requests_ = nullptr;
  size_t dropped_said_ = 0;  // how many entries left out the log last said
  std::thread thread_;
};

}  // namespace gpuslice::deviceplugin
