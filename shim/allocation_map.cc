#include "shim/allocation_map.h"

namespace gpuslice::shim {

void AllocationMap::Insert(uint64_t key, Charge charge) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mutex);
  shard.entries[key] = charge;
}

bool AllocationMap::Take(uint64_t key, Charge* charge) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end()) return false;
  *charge = it->second;
  shard.entries.erase(it);
  return true;
}

bool AllocationMap::Find(uint64_t key, Charge* charge) {
  Shard& shard = ShardOf(key);
  std::lock_guard<std::mutex> lock(shard.mutex);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end()) return false;
  *charge = it->second;
  return true;
}

void AllocationMap::Clear() {
  for (auto& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.entries.clear();
  }
}

}  // namespace gpuslice::shim
