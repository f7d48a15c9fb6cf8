// What each live allocation charged, so that its free returns exactly that to the right
// ledger. Sharded by address: allocations from many threads rarely meet on one lock.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace gpuslice::shim {

struct Charge {
  uint64_t bytes = 0;
  int ledger = -1;
};

class AllocationMap {
 public:
  void Insert(uint64_t key, Charge charge);
  // Removes and returns the entry; false when the key is unknown (not charged by us).
  bool Take(uint64_t key, Charge* charge);
  bool Find(uint64_t key, Charge* charge);
  void Clear();

 private:
  struct Shard {
    std::mutex mutex;
    std::unordered_map<uint64_t, Charge> entries;
  };
  Shard& ShardOf(uint64_t key) { return shards_[(key >> 9) * 0x9E3779B97F4A7C15ULL >> 60]; }
  std::array<Shard, 16> shards_;
};

}  // namespace gpuslice::shim
