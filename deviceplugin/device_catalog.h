// What the plugin advertises: the shared devices (GPUs or MIG instances), the IDs of their
// slices and their health.
// Health changes bump a version that ListAndWatch streams wait on, so that the kubelet gets the
// whole list again on every change (as the API asks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/cond_var.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "deviceplugin/device_ids.h"
#include "gpu/gpu_inventory.h"

namespace gpuslice::deviceplugin {

class DeviceCatalog {
 public:
  // Every device is cut into `slices_per_gpu` slices (a divisor of 100, so that a slice's
  // share of the time is a whole percentage).
  DeviceCatalog(std::vector<gpu::GpuInfo> gpus, int slices_per_gpu);

  const std::vector<gpu::GpuInfo>& gpus() const { return gpus_; }
  int slices_per_gpu() const { return slices_per_gpu_; }
  // Percent of a device's time per slice.
  int PercentPerSlice() const { return 100 / slices_per_gpu_; }
  // Memory per slice of gpus()[position]: 1/slices_per_gpu of it, rounded down to a MiB (so
  // that no device is ever promised more than it has, and the quota is a whole "NMi").
  uint64_t SliceBytes(size_t position) const;
  // The IDs of gpus()[position], in slice order.
  const std::vector<std::string>& SliceIds(size_t position) const { return ids_[position]; }
  // The position in gpus() of the device an ID names; NotFound ("unknown device ID '<id>'") when
  // it is not an ID of this catalog.
  Result<size_t> PositionOfSlice(const std::string& id) const;
  // "GPU 3 GPU-8f6c…" or "MIG 1 of GPU 3 MIG-…", for messages.
  std::string Describe(size_t position) const;

  struct HealthView {
    uint64_t version = 0;
    std::vector<bool> healthy;  // per position
    bool stopping = false;
  };
  HealthView Health() const;
  // Records a GPU's health; a change bumps the version and wakes the watchers.
  void SetHealthy(size_t position, bool healthy);
  // Waits until the version differs from `seen`, Stop() is called or timeout_ms pass.
  HealthView WaitForChange(uint64_t seen, int timeout_ms) const;
  // Wakes every watcher for good (the plugin is stopping).
  void Stop();

 private:
  std::vector<gpu::GpuInfo> gpus_;
  int slices_per_gpu_;
  std::vector<std::vector<std::string>> ids_;  // per position

  mutable Mutex mutex_;
  mutable CondVar changed_;
  uint64_t version_ GUARDED_BY(mutex_) = 1;
  std::vector<bool> healthy_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
};

}  // namespace gpuslice::deviceplugin
