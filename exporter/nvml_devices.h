// The device figures of the exporter's /metrics, from NVML. libnvidia-ml.so.1 is dlopen()ed, not
// linked, so the exporter starts (and serves the broker's figures) on a node whose driver is
// missing or not loaded yet; it tries again at every scrape until NVML answers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "exporter/metrics_text.h"

namespace gpuslice::exporter {

class NvmlDevices {
 public:
  NvmlDevices();
  ~NvmlDevices();
  NvmlDevices(const NvmlDevices&) = delete;
  NvmlDevices& operator=(const NvmlDevices&) = delete;

  // Every device's figures; an error of one line when NVML cannot be loaded or initialised.
  // Safe to call from several threads at once.
  Result<std::vector<DeviceFigures>> Read();

 private:
  Status Load() REQUIRES(mutex_);
  Mutex mutex_;
  void* library_ GUARDED_BY(mutex_) = nullptr;
  bool initialised_ GUARDED_BY(mutex_) = false;
  struct Api;
  std::unique_ptr<Api> api_ GUARDED_BY(mutex_);
};

}  // namespace gpuslice::exporter
