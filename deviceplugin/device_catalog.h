// What the plugin advertises: the shared GPUs, their unit IDs per resource and their health.
// Health changes bump a version that ListAndWatch streams wait on, so that the kubelet gets the
// whole list again on every change (as the API asks).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "deviceplugin/device_ids.h"
#include "deviceplugin/gpu_inventory.h"

namespace gpuslice::deviceplugin {

class DeviceCatalog {
 public:
  DeviceCatalog(std::vector<GpuInfo> gpus, uint64_t unit_bytes);

  const std::vector<GpuInfo>& gpus() const { return gpus_; }
  uint64_t unit_bytes() const { return unit_bytes_; }
  // Units of `kind` on gpus()[position]: whole unit_bytes of its memory, or 100 percent.
  int UnitCount(size_t position, UnitKind kind) const;
  // The IDs of `kind` on gpus()[position], in unit order.
  const std::vector<std::string>& UnitIds(size_t position, UnitKind kind) const;
  // The position in gpus() of the GPU an ID of `kind` names, or -1 when the ID is not one this
  // catalog advertises for that kind.
  int PositionOfUnit(const std::string& id, UnitKind kind) const;

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
  std::vector<GpuInfo> gpus_;
  uint64_t unit_bytes_;
  std::vector<std::vector<std::string>> memory_ids_;   // per position
  std::vector<std::vector<std::string>> compute_ids_;  // per position

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  uint64_t version_ = 1;          // guarded by mutex_
  std::vector<bool> healthy_;     // guarded by mutex_
  bool stopping_ = false;         // guarded by mutex_
};

}  // namespace gpuslice::deviceplugin
