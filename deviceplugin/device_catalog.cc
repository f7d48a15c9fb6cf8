#include "deviceplugin/device_catalog.h"

#include <chrono>

#include <fmt/format.h>

#include "common/mutex_lock.h"

namespace gpuslice::deviceplugin {

DeviceCatalog::DeviceCatalog(std::vector<gpu::GpuInfo> gpus, int slices_per_gpu)
    : gpus_(std::move(gpus)), slices_per_gpu_(slices_per_gpu), healthy_(gpus_.size(), true) {
  for (size_t p = 0; p < gpus_.size(); ++p) {
    ids_.emplace_back();
    for (int k = 0; k < slices_per_gpu_; ++k) ids_.back().push_back(FormatSliceId(gpus_[p].uuid, k));
  }
}

uint64_t DeviceCatalog::SliceBytes(size_t position) const {
  constexpr uint64_t kMiB = 1ULL << 20;
  return gpus_[position].total_memory / static_cast<uint64_t>(slices_per_gpu_) / kMiB * kMiB;
}

Result<size_t> DeviceCatalog::PositionOfSlice(const std::string& id) const {
  const auto slice = ParseSliceId(id);
  if (slice && slice->index < slices_per_gpu_) {
    for (size_t p = 0; p < gpus_.size(); ++p) {
      if (gpus_[p].uuid == slice->device_uuid) return p;
    }
  }
  return Status::NotFound(fmt::format("unknown device ID '{}'", id));
}

std::string DeviceCatalog::Describe(size_t position) const {
  const gpu::GpuInfo& g = gpus_[position];
  if (g.mig_index < 0) return fmt::format("GPU {} {}", g.index, g.uuid);
  return fmt::format("MIG device {} of GPU {} {}", g.mig_index, g.index, g.uuid);
}

DeviceCatalog::HealthView DeviceCatalog::Health() const {
  MutexLock lock(&mutex_);
  return HealthView{version_, healthy_, stopping_};
}

void DeviceCatalog::SetHealthy(size_t position, bool healthy) {
  {
    MutexLock lock(&mutex_);
    if (healthy_[position] == healthy) return;
    healthy_[position] = healthy;
    ++version_;
  }
  changed_.SignalAll();
}

DeviceCatalog::HealthView DeviceCatalog::WaitForChange(uint64_t seen, int timeout_ms) const {
  MutexLock lock(&mutex_);
  changed_.WaitFor(&mutex_, std::chrono::milliseconds(timeout_ms),
                   [&]() REQUIRES(mutex_) { return version_ != seen || stopping_; });
  return HealthView{version_, healthy_, stopping_};
}

void DeviceCatalog::Stop() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  changed_.SignalAll();
}

}  // namespace gpuslice::deviceplugin
