// What each live allocation charged, so that its free returns exactly that to the right
// ledger. Sharded by address: allocations from many threads rarely meet on one lock.
//
// The hooks take an entry out BEFORE the driver frees the memory (and put it back if the free
// fails): once the driver has freed an address it may hand it to another thread at once, whose
// entry must not meet ours.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "broker/checked_index.h"
#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "shim/address_table.h"

namespace gpuslice::shim {

struct Charge {
  uint64_t bytes = 0;
  std::optional<broker::LedgerId> ledger;  // set in every charge recorded
  // The context whose destruction frees the allocation (cuMemAlloc, arrays...), or nullptr
  // for memory that outlives contexts (stream-ordered pools, virtual-memory handles).
  const void* context = nullptr;
};

class AllocationMap {
 public:
  // Records `charge` under `key`. An entry already there is stale (the driver does not hand out
  // a live address twice: its memory was freed where gpuslice could not see it): it is never
  // overwritten in silence but returned in *stale, to be credited. True when there was one.
  // Out of memory to grow the table, the charge is not recorded: it stays on the ledger until
  // the process exits (fail closed), and nothing is thrown into the application.
  bool Insert(uint64_t key, Charge charge, Charge* stale);
  // Removes and returns the entry; false when the key is unknown (not charged by us).
  bool Take(uint64_t key, Charge* charge);
  // Removes and returns every entry of `context` (keys in *keys, charges in *charges, in step).
  void TakeContext(const void* context, std::vector<uint64_t>* keys, std::vector<Charge>* charges);

 private:
  struct Shard {
    Mutex mutex;
    AddressTable<Charge> entries GUARDED_BY(mutex);
  };
  Shard& ShardOf(uint64_t key) { return shards_[(key >> 9) * 0x9E3779B97F4A7C15ULL >> 60]; }
  std::array<Shard, 16> shards_;
};

}  // namespace gpuslice::shim
