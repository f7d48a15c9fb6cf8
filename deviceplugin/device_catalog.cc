#include "deviceplugin/device_catalog.h"

#include <chrono>

namespace gpuslice::deviceplugin {

constexpr int kComputeUnitsPerGpu = 100;  // one per percent of the GPU's time

DeviceCatalog::DeviceCatalog(std::vector<GpuInfo> gpus, uint64_t unit_bytes)
    : gpus_(std::move(gpus)), unit_bytes_(unit_bytes), healthy_(gpus_.size(), true) {
  for (size_t p = 0; p < gpus_.size(); ++p) {
    memory_ids_.emplace_back();
    compute_ids_.emplace_back();
    for (int k = 0; k < UnitCount(p, UnitKind::kMemory); ++k)
      memory_ids_.back().push_back(FormatUnitId(gpus_[p].uuid, UnitKind::kMemory, k));
    for (int k = 0; k < kComputeUnitsPerGpu; ++k)
      compute_ids_.back().push_back(FormatUnitId(gpus_[p].uuid, UnitKind::kCompute, k));
  }
}

int DeviceCatalog::UnitCount(size_t position, UnitKind kind) const {
  if (kind == UnitKind::kCompute) return kComputeUnitsPerGpu;
  return static_cast<int>(gpus_[position].total_memory / unit_bytes_);
}

const std::vector<std::string>& DeviceCatalog::UnitIds(size_t position, UnitKind kind) const {
  return kind == UnitKind::kMemory ? memory_ids_[position] : compute_ids_[position];
}

int DeviceCatalog::PositionOfUnit(const std::string& id, UnitKind kind) const {
  const auto unit = ParseUnitId(id);
  if (!unit || unit->kind != kind) return -1;
  for (size_t p = 0; p < gpus_.size(); ++p) {
    if (gpus_[p].uuid == unit->gpu_uuid) return unit->index < UnitCount(p, kind) ? static_cast<int>(p) : -1;
  }
  return -1;
}

DeviceCatalog::HealthView DeviceCatalog::Health() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return HealthView{version_, healthy_, stopping_};
}

void DeviceCatalog::SetHealthy(size_t position, bool healthy) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (healthy_[position] == healthy) return;
    healthy_[position] = healthy;
    ++version_;
  }
  changed_.notify_all();
}

DeviceCatalog::HealthView DeviceCatalog::WaitForChange(uint64_t seen, int timeout_ms) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return version_ != seen || stopping_; });
  return HealthView{version_, healthy_, stopping_};
}

void DeviceCatalog::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
}

}  // namespace gpuslice::deviceplugin
