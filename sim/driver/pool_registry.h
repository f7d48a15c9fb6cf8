// The memory pools of this process, per device: its default pool (created on first use), the
// pool cuMemAllocAsync takes from (cuDeviceSetMemPool), and every live pool. A fork child that
// runs cuInit again starts with none: the parent's pools are not its own.
//
// Lock order: the registry's lock, then a pool's mutex. Each function takes the registry's lock
// itself; none is called with a pool's mutex held.
#pragma once

#include "pool_allocator.h"

namespace gpuslice::sim {

// A live (registered, not destroyed) pool of this process.
bool ValidPool(Driver* d, CUmemoryPool pool);

// The device's default pool, created on first use.
Pool* DefaultPool(Driver* d, int device);
// The pool cuMemAllocAsync takes from on `device`: the one cuDeviceSetMemPool set, else the default.
Pool* CurrentPool(Driver* d, int device);
// Makes `pool` (of `device`) the one cuMemAllocAsync takes from; the default pool resets it.
void SetCurrentPool(Driver* d, int device, Pool* pool);

// A new pool with `props` (checked by the caller), registered with the driver and listed.
Pool* CreatePool(Driver* d, const CUmemPoolProps& props);
// Takes `pool` off the list (a device whose current pool it was takes its default pool again)
// and unregisters its handle; the caller frees the pool itself.
void ForgetPool(Driver* d, Pool* pool);

// Releases every unused chunk of every pool of `device` (the OUT_OF_MEMORY fallback).
void ReleaseUnusedOnDevice(Driver* d, int device);

}  // namespace gpuslice::sim
