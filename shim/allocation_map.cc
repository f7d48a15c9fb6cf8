#include "shim/allocation_map.h"

#include "common/mutex_lock.h"

namespace gpuslice::shim {

bool AllocationMap::Insert(uint64_t key, Charge charge, Charge* stale) {
  Shard& shard = ShardOf(key);
  MutexLock lock(&shard.mutex);
  auto [it, inserted] = shard.entries.try_emplace(key, charge);
  if (inserted) return false;
  *stale = it->second;
  it->second = charge;
  return true;
}

bool AllocationMap::Take(uint64_t key, Charge* charge) {
  Shard& shard = ShardOf(key);
  MutexLock lock(&shard.mutex);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end()) return false;
  *charge = it->second;
  shard.entries.erase(it);
  return true;
}

void AllocationMap::TakeContext(const void* context, std::vector<uint64_t>* keys, std::vector<Charge>* charges) {
  for (Shard& shard : shards_) {
    MutexLock lock(&shard.mutex);
    for (auto it = shard.entries.begin(); it != shard.entries.end();) {
      if (it->second.context == context) {
        keys->push_back(it->first);
        charges->push_back(it->second);
        it = shard.entries.erase(it);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace gpuslice::shim
