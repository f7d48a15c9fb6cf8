#include "shim/allocation_map.h"

#include "common/mutex_lock.h"

namespace gpuslice::shim {

bool AllocationMap::Insert(uint64_t key, Charge charge, Charge* stale) {
  Shard& shard = ShardOf(key);
  MutexLock lock(&shard.mutex);
  try {
    auto [value, inserted] = shard.entries.TryInsert(key, charge);
    if (inserted) return false;
    *stale = *value;
    *value = charge;
    return true;
  } catch (...) {  // the table could not grow
    return false;
  }
}

bool AllocationMap::Take(uint64_t key, Charge* charge) {
  Shard& shard = ShardOf(key);
  MutexLock lock(&shard.mutex);
  const std::optional<Charge> taken = shard.entries.Take(key);
  if (!taken) return false;
  *charge = *taken;
  return true;
}

void AllocationMap::TakeContext(const void* context, std::vector<uint64_t>* keys, std::vector<Charge>* charges) {
  for (Shard& shard : shards_) {
    MutexLock lock(&shard.mutex);
    shard.entries.TakeIf([&](uint64_t key, const Charge& charge) {
      if (charge.context != context) return false;
      keys->push_back(key);
      charges->push_back(charge);
      return true;
    });
  }
}

}  // namespace gpuslice::shim
