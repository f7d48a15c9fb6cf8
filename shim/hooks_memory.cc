// Every device-allocation path, charged to the tenant's ledger before the driver is called and
// credited when the memory is freed (docs/accounting.md):
//   reserve in the shared ledger -> call the driver -> keep the charge, or roll it back;
//   take the charge out -> call the driver's free -> credit it, or put it back.
// Never check-then-allocate: concurrent allocations of a tenant can never exceed its quota.
// Memory a context owns is also credited when the context is destroyed (hooks_context.cc).
#include "shim/driver_api.h"  // first: declares every versioned name

#include "common/array_bytes.h"
#include "shim/hook_entry.h"

namespace gpuslice::shim {
namespace {

// Reserves `charge` on `ledger`, runs the driver call, rolls the reservation back if it fails,
// and records the charge (owned by `context`) under the key the call produced.
template <typename Call, typename Key>
CUresult ChargeAround(ShimState* state, AllocationMap& map, broker::LedgerId ledger, const void* context,
                      uint64_t charge, Call call, Key key) {
  if (!state->broker().Reserve(ledger, charge)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult rc = call();
  if (rc != CUDA_SUCCESS) {
    state->broker().Release(ledger, charge);
    return rc;
  }
  state->Record(map, key(), Charge{charge, ledger, context});
  return CUDA_SUCCESS;
}

// Frees `key` through `call`. The entry is taken out first: the moment the driver has freed
// the memory another thread may be handed the same address and record its own charge under it.
// If the driver refuses, the memory is still live and the entry goes back.
using MapOf = AllocationMap& (ShimState::*)();

template <typename Call>
CUresult FreeAndCredit(MapOf map_of, uint64_t key, Call call) {
  ShimState* state = key ? ShimState::Get() : nullptr;
  Charge charge;
  const bool charged = state && (state->*map_of)().Take(key, &charge);
  const CUresult rc = call();
  if (!charged) return rc;
  if (rc == CUDA_SUCCESS) {
    // sabotage-point: accounting-credit-skipped
    state->Credit(charge);
  } else {
    state->Record((state->*map_of)(), key, charge);
  }
  return rc;
}

// Memory a context owns, charged to the current context's device.
template <typename Call>
CUresult AllocateInCurrentContext(CUdeviceptr* dptr, size_t bytes, Call call) {
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = EnterHook(&real, &state); rc != CUDA_SUCCESS) return rc;
  if (!dptr || bytes == 0) return call();  // the driver reports its own argument errors
  CUcontext context = nullptr;
  const DriverResult<broker::LedgerId> ledger = state->LedgerAndContext(&context);
  if (!ledger.ok()) return ledger.rc();
  return ChargeAround(state, state->allocations(), *ledger, context, ChargeFor(bytes), call,
                      [&] { return uint64_t{*dptr}; });
}

// Stream-ordered memory: charged to the ledger `find_ledger` gives (the stream's or the pool's
// device), owned by no context.
template <typename FindLedger, typename Call>
CUresult AllocateStreamOrdered(CUdeviceptr* dptr, size_t bytes, FindLedger find_ledger, Call call) {
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = EnterHook(&real, &state); rc != CUDA_SUCCESS) return rc;
  if (!dptr || bytes == 0) return call();
  const DriverResult<broker::LedgerId> ledger = find_ledger(state);
  if (!ledger.ok()) return ledger.rc();
  return ChargeAround(state, state->allocations(), *ledger, nullptr, ChargeFor(bytes), call,
                      [&] { return uint64_t{*dptr}; });
}

template <typename Call>
CUresult CreateArrayOfBytes(std::optional<uint64_t> bytes, const void* handle_out, uint64_t* key_source, Call call) {
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = EnterHook(&real, &state); rc != CUDA_SUCCESS) return rc;
  if (!bytes || !handle_out || *bytes == 0) return call();  // invalid or sparse: nothing to charge
  CUcontext context = nullptr;
  const DriverResult<broker::LedgerId> ledger = state->LedgerAndContext(&context);
  if (!ledger.ok()) return ledger.rc();
  return ChargeAround(state, state->arrays(), *ledger, context, ChargeFor(*bytes), call, [&] { return *key_source; });
}

// a * b, saturated: a charge that cannot be represented admits no quota.
uint64_t SaturatingProduct(uint64_t a, uint64_t b) {
  uint64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? UINT64_MAX : product;
}

CUDA_ARRAY3D_DESCRIPTOR As3D(const CUDA_ARRAY_DESCRIPTOR& d) {
  CUDA_ARRAY3D_DESCRIPTOR out{};
  out.Width = d.Width;
  out.Height = d.Height;
  out.Format = d.Format;
  out.NumChannels = d.NumChannels;
  return out;
}

}  // namespace
}  // namespace gpuslice::shim

using namespace gpuslice::shim;

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return AllocateInCurrentContext(dptr, bytesize, [&] { return CallReal<&RealDriver::cuMemAlloc_v2>(dptr, bytesize); });
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  return AllocateInCurrentContext(dptr, bytesize,
                                  [&] { return CallReal<&RealDriver::cuMemAllocManaged>(dptr, bytesize, flags); });
}

// The pitch is only known after the call: reserve for the narrowest legal pitch (rows padded
// to 512 bytes), then settle the difference once the driver has chosen. Sizes that overflow
// saturate: such a request is refused as out of memory, never charged as a small one.
CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes) {
  auto call = [&] {
    return CallReal<&RealDriver::cuMemAllocPitch_v2>(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  };
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = EnterHook(&real, &state); rc != CUDA_SUCCESS) return rc;
  if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0) return call();
  CUcontext context = nullptr;
  const DriverResult<gpuslice::broker::LedgerId> found = state->LedgerAndContext(&context);
  if (!found.ok()) return found.rc();
  const gpuslice::broker::LedgerId ledger = *found;
  const uint64_t estimate = ChargeFor(SaturatingProduct(ChargeFor(WidthInBytes), Height));
  if (!state->broker().Reserve(ledger, estimate)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult rc = call(); rc != CUDA_SUCCESS) {
    state->broker().Release(ledger, estimate);
    return rc;
  }
  // sabotage-point: pitch-charged-by-width
  const uint64_t actual = ChargeFor(SaturatingProduct(*pPitch, Height));
  if (actual > estimate && !state->broker().Reserve(ledger, actual - estimate)) {
    real->cuMemFree_v2(*dptr);
    state->broker().Release(ledger, estimate);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (actual < estimate) state->broker().Release(ledger, estimate - actual);
  state->Record(state->allocations(), *dptr, Charge{actual, ledger, context});
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  return FreeAndCredit(&ShimState::allocations, dptr, [&] { return CallReal<&RealDriver::cuMemFree_v2>(dptr); });
}

// Stream-ordered allocations are charged when asked for and credited when freed, whatever
// the pool keeps cached in between, on the ledger of the device the memory lives on: the
// stream's, or the pool's (docs/accounting.md).
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return AllocateStreamOrdered(
      dptr, bytesize, [&](ShimState* state) { return state->LedgerForStream(hStream); },
      [&] { return CallReal<&RealDriver::cuMemAllocAsync>(dptr, bytesize, hStream); });
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return AllocateStreamOrdered(
      dptr, bytesize, [&](ShimState* state) { return state->LedgerForStream(hStream); },
      [&] { return CallReal<&RealDriver::cuMemAllocAsync_ptsz>(dptr, bytesize, hStream); });
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  return AllocateStreamOrdered(
      dptr, bytesize, [&](ShimState* state) { return state->LedgerForPool(pool, hStream); },
      [&] { return CallReal<&RealDriver::cuMemAllocFromPoolAsync>(dptr, bytesize, pool, hStream); });
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  return AllocateStreamOrdered(
      dptr, bytesize, [&](ShimState* state) { return state->LedgerForPool(pool, hStream); },
      [&] { return CallReal<&RealDriver::cuMemAllocFromPoolAsync_ptsz>(dptr, bytesize, pool, hStream); });
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return FreeAndCredit(&ShimState::allocations, dptr,
                       [&] { return CallReal<&RealDriver::cuMemFreeAsync>(dptr, hStream); });
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return FreeAndCredit(&ShimState::allocations, dptr,
                       [&] { return CallReal<&RealDriver::cuMemFreeAsync_ptsz>(dptr, hStream); });
}

// Pools the application creates, with their device: what cuMemAllocFromPoolAsync charges.
CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  const RealDriver* real = Real();
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult rc = real->cuMemPoolCreate(pool, poolProps);
  if (rc == CUDA_SUCCESS && pool && poolProps && poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    if (ShimState* state = ShimState::Get()) state->NotePool(*pool, poolProps->location.id);
  }
  return rc;
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  const RealDriver* real = Real();
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult rc = real->cuMemPoolDestroy(pool);
  if (rc == CUDA_SUCCESS) {
    if (ShimState* state = ShimState::Get()) state->ForgetPool(pool);
  }
  return rc;
}

// Physical memory of the virtual-memory API: charged at cuMemCreate when it lives on a device,
// credited at cuMemRelease of the handle. Handles belong to the process, not to a context.
CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                             unsigned long long flags) {
  auto call = [&] { return CallReal<&RealDriver::cuMemCreate>(handle, size, prop, flags); };
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = EnterHook(&real, &state); rc != CUDA_SUCCESS) return rc;
  if (!handle || !prop || size == 0 || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return call();
  const DriverResult<gpuslice::broker::LedgerId> ledger = state->LedgerForDevice(prop->location.id);
  if (!ledger.ok()) return ledger.rc();
  return ChargeAround(state, state->physical(), *ledger, nullptr, ChargeFor(size), call,
                      [&] { return uint64_t{*handle}; });
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  return FreeAndCredit(&ShimState::physical, handle, [&] { return CallReal<&RealDriver::cuMemRelease>(handle); });
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  uint64_t key = 0;
  const auto bytes = pAllocateArray ? gpuslice::ArrayBytes(As3D(*pAllocateArray)) : std::nullopt;
  return CreateArrayOfBytes(bytes, pHandle, &key, [&] {
    const CUresult rc = CallReal<&RealDriver::cuArrayCreate_v2>(pHandle, pAllocateArray);
    if (rc == CUDA_SUCCESS) key = reinterpret_cast<uint64_t>(*pHandle);
    return rc;
  });
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
  uint64_t key = 0;
  const auto bytes = pAllocateArray ? gpuslice::ArrayBytes(*pAllocateArray) : std::nullopt;
  return CreateArrayOfBytes(bytes, pHandle, &key, [&] {
    const CUresult rc = CallReal<&RealDriver::cuArray3DCreate_v2>(pHandle, pAllocateArray);
    if (rc == CUDA_SUCCESS) key = reinterpret_cast<uint64_t>(*pHandle);
    return rc;
  });
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                        unsigned int numMipmapLevels) {
  uint64_t key = 0;
  const auto bytes = pMipmappedArrayDesc ? gpuslice::MipmappedArrayBytes(*pMipmappedArrayDesc, numMipmapLevels)
                                         : std::nullopt;
  return CreateArrayOfBytes(bytes, pHandle, &key, [&] {
    const CUresult rc = CallReal<&RealDriver::cuMipmappedArrayCreate>(pHandle, pMipmappedArrayDesc, numMipmapLevels);
    if (rc == CUDA_SUCCESS) key = reinterpret_cast<uint64_t>(*pHandle);
    return rc;
  });
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray) {
  return FreeAndCredit(&ShimState::arrays, reinterpret_cast<uint64_t>(hArray),
                       [&] { return CallReal<&RealDriver::cuArrayDestroy>(hArray); });
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  return FreeAndCredit(&ShimState::arrays, reinterpret_cast<uint64_t>(hMipmappedArray),
                       [&] { return CallReal<&RealDriver::cuMipmappedArrayDestroy>(hMipmappedArray); });
}
