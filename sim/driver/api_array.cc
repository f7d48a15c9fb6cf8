// CUDA arrays and mipmapped arrays: device memory whose size the application never states, so
// the simulator (and gpuslice, which must count it against quotas) estimates it the same way:
// see ArrayBytes / MipmappedArrayBytes. The estimate is charged to the device (rounded with
// ChargedBytes) at creation and credited at destruction; arrays have no host backing.
#include "driver_api.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "common/array_bytes.h"
#include "driver_state.h"

struct CUmipmappedArray_st;

struct CUarray_st {
  int device = 0;
  const CUctx_st* context = nullptr;  // destroying it destroys the array
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  bool created_3d = false;               // by cuArray3DCreate (or a mipmap level)
  uint64_t charged = 0;                  // device bytes charged for it (0 for a mipmap level)
  CUmipmappedArray_st* owner = nullptr;  // the mipmapped array it is a level of, if any
};

struct CUmipmappedArray_st {
  int device = 0;
  const CUctx_st* context = nullptr;
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  unsigned int levels = 0;
  uint64_t charged = 0;
  std::mutex mutex;
  std::vector<CUarray_st*> level_arrays;  // created on demand by cuMipmappedArrayGetLevel
};

namespace gpuslice::sim {
namespace {

using gpuslice::ArrayBytes;
using gpuslice::LevelDescriptor;
using gpuslice::MipmappedArrayBytes;

// The live arrays and mipmapped arrays (not mipmap levels), for DestroyArraysOfContext.
std::mutex g_live_mutex;
std::vector<CUarray_st*> g_live_arrays;
std::vector<CUmipmappedArray_st*> g_live_mipmaps;

template <typename T>
void Track(std::vector<T*>& live, T* handle) {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  live.push_back(handle);
}

template <typename T>
void Untrack(std::vector<T*>& live, T* handle) {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  live.erase(std::remove(live.begin(), live.end(), handle), live.end());
}

void DestroyArrayNow(Driver* d, CUarray_st* array) {
  Untrack(g_live_arrays, array);
  d->Unregister(array);
  if (array->charged) d->CreditDevice(array->device, array->charged);
  delete array;
}

void DestroyMipmappedArrayNow(Driver* d, CUmipmappedArray_st* mipmap) {
  Untrack(g_live_mipmaps, mipmap);
  d->Unregister(mipmap);
  for (CUarray_st* level : mipmap->level_arrays) {
    if (!level) continue;
    d->Unregister(level);
    delete level;
  }
  if (mipmap->charged) d->CreditDevice(mipmap->device, mipmap->charged);
  delete mipmap;
}

CUresult CreateArray(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR& desc, bool created_3d) {
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  const auto bytes = ArrayBytes(desc);
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t charged = ChargedBytes(*bytes);
  if (charged && d->ChargeDevice(ctx->device, charged) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  auto* array = new CUarray_st();
  array->device = ctx->device;
  array->context = ctx;
  array->desc = desc;
  array->created_3d = created_3d;
  array->charged = charged;
  d->Register(array);
  Track(g_live_arrays, array);
  *handle = array;
  return CUDA_SUCCESS;
}

}  // namespace

void DestroyArraysOfContext(Driver* driver, const CUctx_st* ctx) {
  std::vector<CUarray_st*> arrays;
  std::vector<CUmipmappedArray_st*> mipmaps;
  {
    std::lock_guard<std::mutex> lock(g_live_mutex);
    for (CUarray_st* a : g_live_arrays)
      if (a->context == ctx) arrays.push_back(a);
    for (CUmipmappedArray_st* m : g_live_mipmaps)
      if (m->context == ctx) mipmaps.push_back(m);
  }
  for (CUarray_st* a : arrays) DestroyArrayNow(driver, a);
  for (CUmipmappedArray_st* m : mipmaps) DestroyMipmappedArrayNow(driver, m);
}

}  // namespace gpuslice::sim

using namespace gpuslice::sim;

CUresult CUDAAPI cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) try {
  GPUSLICE_SIM_ENTRY();
  if (!pAllocateArray) {
    Driver* d = nullptr;
    CUctx_st* ctx = nullptr;
    if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = pAllocateArray->Width;
  desc.Height = pAllocateArray->Height;
  desc.Depth = 0;
  desc.Format = pAllocateArray->Format;
  desc.NumChannels = pAllocateArray->NumChannels;
  desc.Flags = 0;
  return CreateArray(pHandle, desc, false);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) try {
  GPUSLICE_SIM_ENTRY();
  if (!pAllocateArray) {
    Driver* d = nullptr;
    CUctx_st* ctx = nullptr;
    if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CreateArray(pHandle, *pAllocateArray, true);
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuArrayDestroy(CUarray hArray) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!hArray || !d->IsRegistered(hArray)) return CUDA_ERROR_INVALID_HANDLE;
  // A level of a mipmapped array belongs to it and goes with cuMipmappedArrayDestroy.
  if (hArray->owner) return CUDA_ERROR_INVALID_HANDLE;
  DestroyArrayNow(d, hArray);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* pArrayDescriptor, CUarray hArray) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!pArrayDescriptor) return CUDA_ERROR_INVALID_VALUE;
  if (!hArray || !d->IsRegistered(hArray)) return CUDA_ERROR_INVALID_HANDLE;
  // A 2D descriptor cannot describe a 3D or layered array.
  if (hArray->desc.Depth != 0) return CUDA_ERROR_INVALID_VALUE;
  pArrayDescriptor->Width = hArray->desc.Width;
  pArrayDescriptor->Height = hArray->desc.Height;
  pArrayDescriptor->Format = hArray->desc.Format;
  pArrayDescriptor->NumChannels = hArray->desc.NumChannels;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* pArrayDescriptor, CUarray hArray) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!pArrayDescriptor) return CUDA_ERROR_INVALID_VALUE;
  if (!hArray || !d->IsRegistered(hArray)) return CUDA_ERROR_INVALID_HANDLE;
  *pArrayDescriptor = hArray->desc;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                        unsigned int numMipmapLevels) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  CUctx_st* ctx = nullptr;
  if (CUresult rc = RequireContext(&d, &ctx); rc != CUDA_SUCCESS) return rc;
  if (!pHandle || !pMipmappedArrayDesc) return CUDA_ERROR_INVALID_VALUE;
  const auto bytes = MipmappedArrayBytes(*pMipmappedArrayDesc, numMipmapLevels);
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t charged = ChargedBytes(*bytes);
  if (charged && d->ChargeDevice(ctx->device, charged) != CUDA_SUCCESS) return CUDA_ERROR_OUT_OF_MEMORY;
  auto* mipmap = new CUmipmappedArray_st();
  mipmap->device = ctx->device;
  mipmap->context = ctx;
  mipmap->desc = *pMipmappedArrayDesc;
  mipmap->levels = numMipmapLevels;
  mipmap->charged = charged;
  mipmap->level_arrays.assign(numMipmapLevels, nullptr);
  d->Register(mipmap);
  Track(g_live_mipmaps, mipmap);
  *pHandle = mipmap;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray* pLevelArray, CUmipmappedArray hMipmappedArray,
                                          unsigned int level) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!pLevelArray) return CUDA_ERROR_INVALID_VALUE;
  if (!hMipmappedArray || !d->IsRegistered(hMipmappedArray)) return CUDA_ERROR_INVALID_HANDLE;
  if (level >= hMipmappedArray->levels) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(hMipmappedArray->mutex);
  CUarray_st*& array = hMipmappedArray->level_arrays[level];
  if (!array) {
    // A view of memory the mipmapped array already holds: nothing more is charged.
    array = new CUarray_st();
    array->device = hMipmappedArray->device;
    array->desc = LevelDescriptor(hMipmappedArray->desc, level);
    array->created_3d = true;
    array->owner = hMipmappedArray;
    d->Register(array);
  }
  *pLevelArray = array;
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}

CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) try {
  GPUSLICE_SIM_ENTRY();
  Driver* d = nullptr;
  if (CUresult rc = RequireInit(&d); rc != CUDA_SUCCESS) return rc;
  if (!hMipmappedArray || !d->IsRegistered(hMipmappedArray)) return CUDA_ERROR_INVALID_HANDLE;
  DestroyMipmappedArrayNow(d, hMipmappedArray);
  return CUDA_SUCCESS;
} catch (...) {
  return EntryFailed<CUresult>(__func__);
}
