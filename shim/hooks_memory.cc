// Every device-allocation path, charged to the tenant's ledger before the driver is called and
// credited when the memory is freed (docs/accounting.md):
//   reserve in the shared ledger -> call the driver -> keep the charge, or roll it back.
// Never check-then-allocate: concurrent allocations of a tenant can never exceed its quota.
#include "shim/driver_api.h"  // first: declares every versioned name

#include "common/array_bytes.h"
#include "shim/real_driver.h"
#include "shim/shim_state.h"

namespace gpuslice::shim {
namespace {

// The real driver and the shim's state, or the error the call must return.
CUresult Enter(const RealDriver** real, ShimState** state) {
  *real = Real();
  if (!*real) return CUDA_ERROR_NOT_INITIALIZED;
  *state = ShimState::Get();
  return *state ? CUDA_SUCCESS : kFailClosed;
}

// Reserves `charge` on `ledger`, runs the driver call, rolls the reservation back if it fails,
// and records the charge under the key the call produced.
template <typename Call, typename Key>
CUresult ChargeAround(ShimState* state, AllocationMap& map, int ledger, uint64_t charge, Call call, Key key) {
  if (!state->broker().Reserve(ledger, charge)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult rc = call();
  if (rc != CUDA_SUCCESS) {
    state->broker().Release(ledger, charge);
    return rc;
  }
  map.Insert(key(), Charge{charge, ledger});
  return CUDA_SUCCESS;
}

// After the driver freed `key`: return what it was charged.
void Credit(ShimState* state, AllocationMap& map, uint64_t key) {
  Charge charge;
  if (map.Take(key, &charge)) state->broker().Release(charge.ledger, charge.bytes);
}

template <typename Call>
CUresult AllocateOnCurrentDevice(CUdeviceptr* dptr, size_t bytes, Call call) {
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = Enter(&real, &state); rc != CUDA_SUCCESS) return rc;
  if (!dptr || bytes == 0) return call();  // the driver reports its own argument errors
  int ledger = -1;
  if (CUresult rc = state->LedgerForCurrentContext(&ledger); rc != CUDA_SUCCESS) return rc;
  return ChargeAround(state, state->allocations(), ledger, ChargeFor(bytes), call, [&] { return uint64_t{*dptr}; });
}

template <typename Call>
CUresult FreeDevicePointer(CUdeviceptr dptr, Call call) {
  const CUresult rc = call();
  if (rc == CUDA_SUCCESS && dptr) {
    if (ShimState* state = ShimState::Get()) Credit(state, state->allocations(), dptr);
  }
  return rc;
}

template <typename Call>
CUresult CreateArrayOfBytes(std::optional<uint64_t> bytes, const void* handle_out, uint64_t* key_source, Call call) {
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = Enter(&real, &state); rc != CUDA_SUCCESS) return rc;
  if (!bytes || !handle_out || *bytes == 0) return call();  // invalid or sparse: nothing to charge
  int ledger = -1;
  if (CUresult rc = state->LedgerForCurrentContext(&ledger); rc != CUDA_SUCCESS) return rc;
  return ChargeAround(state, state->arrays(), ledger, ChargeFor(*bytes), call, [&] { return *key_source; });
}

template <typename Call>
CUresult DestroyArray(uint64_t key, Call call) {
  const CUresult rc = call();
  if (rc == CUDA_SUCCESS) {
    if (ShimState* state = ShimState::Get()) Credit(state, state->arrays(), key);
  }
  return rc;
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
  return AllocateOnCurrentDevice(dptr, bytesize, [&] { return Real()->cuMemAlloc_v2(dptr, bytesize); });
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  return AllocateOnCurrentDevice(dptr, bytesize, [&] { return Real()->cuMemAllocManaged(dptr, bytesize, flags); });
}

// The pitch is only known after the call: reserve for the narrowest legal pitch (rows padded
// to 512 bytes), then settle the difference once the driver has chosen.
CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes) {
  auto call = [&] { return Real()->cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes); };
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = Enter(&real, &state); rc != CUDA_SUCCESS) return rc;
  if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0) return call();
  const uint64_t row = (static_cast<uint64_t>(WidthInBytes) + 511) & ~uint64_t{511};
  if (Height > UINT64_MAX / row) return call();
  int ledger = -1;
  if (CUresult rc = state->LedgerForCurrentContext(&ledger); rc != CUDA_SUCCESS) return rc;
  const uint64_t estimate = ChargeFor(row * Height);
  if (!state->broker().Reserve(ledger, estimate)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult rc = call(); rc != CUDA_SUCCESS) {
    state->broker().Release(ledger, estimate);
    return rc;
  }
  const uint64_t actual = ChargeFor(static_cast<uint64_t>(*pPitch) * Height);
  if (actual > estimate && !state->broker().Reserve(ledger, actual - estimate)) {
    real->cuMemFree_v2(*dptr);
    state->broker().Release(ledger, estimate);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (actual < estimate) state->broker().Release(ledger, estimate - actual);
  state->allocations().Insert(*dptr, Charge{actual, ledger});
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  return FreeDevicePointer(dptr, [&] { return Real() ? Real()->cuMemFree_v2(dptr) : CUDA_ERROR_NOT_INITIALIZED; });
}

// Stream-ordered allocations are charged when asked for and credited when freed, whatever
// the pool keeps cached in between (docs/accounting.md).
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return AllocateOnCurrentDevice(dptr, bytesize, [&] { return Real()->cuMemAllocAsync(dptr, bytesize, hStream); });
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return AllocateOnCurrentDevice(dptr, bytesize,
                                 [&] { return Real()->cuMemAllocAsync_ptsz(dptr, bytesize, hStream); });
}

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  return AllocateOnCurrentDevice(dptr, bytesize,
                                 [&] { return Real()->cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream); });
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream) {
  return AllocateOnCurrentDevice(
      dptr, bytesize, [&] { return Real()->cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream); });
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return FreeDevicePointer(dptr, [&] { return Real() ? Real()->cuMemFreeAsync(dptr, hStream) : CUDA_ERROR_NOT_INITIALIZED; });
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return FreeDevicePointer(
      dptr, [&] { return Real() ? Real()->cuMemFreeAsync_ptsz(dptr, hStream) : CUDA_ERROR_NOT_INITIALIZED; });
}

// Physical memory of the virtual-memory API: charged at cuMemCreate when it lives on a device,
// credited at cuMemRelease of the handle.
CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                             unsigned long long flags) {
  auto call = [&] { return Real()->cuMemCreate(handle, size, prop, flags); };
  const RealDriver* real = nullptr;
  ShimState* state = nullptr;
  if (CUresult rc = Enter(&real, &state); rc != CUDA_SUCCESS) return rc;
  if (!handle || !prop || size == 0 || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return call();
  int ledger = -1;
  if (CUresult rc = state->LedgerForDevice(prop->location.id, &ledger); rc != CUDA_SUCCESS) return rc;
  return ChargeAround(state, state->physical(), ledger, size, call, [&] { return uint64_t{*handle}; });
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  const RealDriver* real = Real();
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult rc = real->cuMemRelease(handle);
  if (rc == CUDA_SUCCESS) {
    if (ShimState* state = ShimState::Get()) Credit(state, state->physical(), handle);
  }
  return rc;
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  uint64_t key = 0;
  const auto bytes = pAllocateArray ? gpuslice::ArrayBytes(As3D(*pAllocateArray)) : std::nullopt;
  return CreateArrayOfBytes(bytes, pHandle, &key, [&] {
    const CUresult rc = Real()->cuArrayCreate_v2(pHandle, pAllocateArray);
    if (rc == CUDA_SUCCESS) key = reinterpret_cast<uint64_t>(*pHandle);
    return rc;
  });
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
  uint64_t key = 0;
  const auto bytes = pAllocateArray ? gpuslice::ArrayBytes(*pAllocateArray) : std::nullopt;
  return CreateArrayOfBytes(bytes, pHandle, &key, [&] {
    const CUresult rc = Real()->cuArray3DCreate_v2(pHandle, pAllocateArray);
    if (rc == CUDA_SUCCESS) key = reinterpret_cast<uint64_t>(*pHandle);
    return rc;
  });
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                        unsigned int numMipmapLevels) {
  uint64_t key = 0;
  const auto bytes =
      pMipmappedArrayDesc ? gpuslice::MipmappedArrayBytes(*pMipmappedArrayDesc, numMipmapLevels) : std::nullopt;
  return CreateArrayOfBytes(bytes, pHandle, &key, [&] {
    const CUresult rc = Real()->cuMipmappedArrayCreate(pHandle, pMipmappedArrayDesc, numMipmapLevels);
    if (rc == CUDA_SUCCESS) key = reinterpret_cast<uint64_t>(*pHandle);
    return rc;
  });
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray) {
  return DestroyArray(reinterpret_cast<uint64_t>(hArray),
                      [&] { return Real() ? Real()->cuArrayDestroy(hArray) : CUDA_ERROR_NOT_INITIALIZED; });
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  return DestroyArray(reinterpret_cast<uint64_t>(hMipmappedArray), [&] {
    return Real() ? Real()->cuMipmappedArrayDestroy(hMipmappedArray) : CUDA_ERROR_NOT_INITIALIZED;
  });
}
