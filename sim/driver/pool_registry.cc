#include "pool_registry.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "driver_state.h"
#include "memory_pool.h"

namespace gpuslice::sim {
namespace {

struct Registry {
  Driver* driver = nullptr;
  std::vector<Pool*> pools;  // live pools (not destroyed), default pools included
  Pool* default_pool[kMaxDevices] = {};
  Pool* current_pool[kMaxDevices] = {};  // nullptr: the default pool
};

std::mutex g_registry_mutex;  // lock order: g_registry_mutex, then a pool's mutex
Registry g_registry;

Registry& RegistryFor(Driver* d) {
  if (g_registry.driver != d) {
    // A fork child re-ran cuInit: the parent's pools are not this process's (they leak, as the
    // parent's driver object does).
    g_registry = Registry{};
    g_registry.driver = d;
  }
  return g_registry;
}

Pool* NewPool(Driver* d, int device, const CUmemPoolProps& props, bool is_default) {
  auto* pool = new Pool();
  pool->driver = d;
  pool->device = device;
  pool->is_default = is_default;
  pool->props = props;
  d->Register(pool);
  return pool;
}

Pool* DefaultPoolLocked(Driver* d, int device) {
  Registry& r = RegistryFor(d);
  if (!r.default_pool[device]) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = device;
    r.default_pool[device] = NewPool(d, device, props, true);
    r.pools.push_back(r.default_pool[device]);
  }
  return r.default_pool[device];
}

}  // namespace

bool ValidPool(Driver* d, CUmemoryPool pool) { return pool && d->IsRegistered(pool); }

Pool* DefaultPool(Driver* d, int device) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  return DefaultPoolLocked(d, device);
}

Pool* CurrentPool(Driver* d, int device) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  Registry& r = RegistryFor(d);
  return r.current_pool[device] ? r.current_pool[device] : DefaultPoolLocked(d, device);
}

void SetCurrentPool(Driver* d, int device, Pool* pool) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  RegistryFor(d).current_pool[device] = pool->is_default ? nullptr : pool;
}

Pool* CreatePool(Driver* d, const CUmemPoolProps& props) {
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  Pool* pool = NewPool(d, props.location.id, props, false);
  RegistryFor(d).pools.push_back(pool);
  return pool;
}

void ForgetPool(Driver* d, Pool* pool) {
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    Registry& r = RegistryFor(d);
    r.pools.erase(std::remove(r.pools.begin(), r.pools.end(), pool), r.pools.end());
    // Destroying a device's current pool makes the default pool current again.
    if (r.current_pool[pool->device] == pool) r.current_pool[pool->device] = nullptr;
  }
  d->Unregister(pool);
}

void ReleaseUnusedOnDevice(Driver* d, int device) {
  std::lock_guard<std::mutex> registry_lock(g_registry_mutex);
  for (Pool* pool : RegistryFor(d).pools) {
    if (pool->device != device) continue;
    std::lock_guard<std::mutex> lock(pool->mutex);
    ReleaseUnusedChunks(pool, 0);
  }
}

void TrimPoolsAtSynchronize(int device) {
  Driver* d = Driver::Get();
  if (!d) return;
  std::lock_guard<std::mutex> registry_lock(g_registry_mutex);
  for (Pool* pool : RegistryFor(d).pools) {
    if (pool->device != device) continue;
    std::lock_guard<std::mutex> lock(pool->mutex);
    if (pool->reserved > pool->release_threshold) ReleaseUnusedChunks(pool, pool->release_threshold);
  }
}

}  // namespace gpuslice::sim
