// Every device's figures as NVML reports them at this moment — memory in use, utilisation,
// compute processes — for the exporter's /metrics and `gpuslicectl status`/`top`. Whole GPUs
// only (NVML lists no MIG instance among its devices). NVML (gpu/nvml_library.h) is loaded at
// the first read and, until it answers, tried again at every read: the exporter starts (and
// serves the broker's figures) on a node whose driver is missing or not loaded yet.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "gpu/nvml_library.h"

namespace gpuslice::gpu {

// One device as NVML reports it.
struct DeviceFigures {
  std::string uuid;  // "GPU-..." (the broker's gpu label)
  std::string name;
  int index = 0;
  unsigned long long memory_total = 0;
  unsigned long long memory_used = 0;
  std::optional<unsigned int> utilization_pct;  // absent when NVML does not support it
  std::optional<unsigned int> processes;        // compute processes running on it
  // Those processes: pid (the node's PID namespace, as NVML reports it) and device memory.
  struct Process {
    unsigned int pid = 0;
    unsigned long long memory_used = 0;
  };
  std::vector<Process> process_list;
};

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
  std::unique_ptr<const NvmlLibrary> nvml_ GUARDED_BY(mutex_);
  bool initialised_ GUARDED_BY(mutex_) = false;
};

}  // namespace gpuslice::gpu
