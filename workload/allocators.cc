#include "workload/allocators.h"

#include <algorithm>

namespace gpuslice::workload {
namespace {

constexpr unsigned char kTouchByte = 0x5a;

struct Shape2D {
  size_t width, height;
};

Shape2D RowsFor(uint64_t bytes) {
  const uint64_t width = std::min(bytes, kRowBytes);
  return {static_cast<size_t>(width), static_cast<size_t>((bytes + width - 1) / width)};
}

CUmemLocation DeviceLocation(const Session& s) {
  CUmemLocation location = {};
  location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  location.id = s.device();
  return location;
}

// cuMemAlloc, and cuMemAllocManaged which differs only in the call.
class LinearAllocator : public Allocator {
 public:
  LinearAllocator(const Session& s, bool managed) : Allocator(s), managed_(managed) {}
  Outcome Allocate(uint64_t bytes, Allocation* out, CUresult* refusal) override {
    const auto& d = s_.driver();
    *refusal = managed_ ? d.cuMemAllocManaged(&out->ptr, bytes, CU_MEM_ATTACH_GLOBAL) : d.cuMemAlloc(&out->ptr, bytes);
    out->bytes = bytes;
    return *refusal == CUDA_SUCCESS ? Outcome::kObtained : Outcome::kRefused;
  }
  bool Free(const Allocation& a) override { return DRIVER_CALL(s_, cuMemFree, a.ptr); }

 private:
  bool managed_;
};

class PitchAllocator : public Allocator {
 public:
  explicit PitchAllocator(const Session& s) : Allocator(s) {}
  Outcome Allocate(uint64_t bytes, Allocation* out, CUresult* refusal) override {
    const Shape2D shape = RowsFor(bytes);
    *refusal = s_.driver().cuMemAllocPitch(&out->ptr, &out->pitch, shape.width, shape.height, 4);
    out->bytes = static_cast<uint64_t>(out->pitch) * shape.height;
    return *refusal == CUDA_SUCCESS ? Outcome::kObtained : Outcome::kRefused;
  }
  bool Free(const Allocation& a) override { return DRIVER_CALL(s_, cuMemFree, a.ptr); }
};

// cuMemAllocAsync from the device's default pool, or cuMemAllocFromPoolAsync from a pool of its
// own. Each allocation is synchronised so that it is real before it is counted or touched.
class StreamOrderedAllocator : public Allocator {
 public:
  StreamOrderedAllocator(const Session& s, CUstream stream, bool own_pool)
      : Allocator(s), stream_(stream), own_pool_(own_pool) {}
  bool Prepare() override {
    if (!own_pool_) return true;
    CUmemPoolProps props = {};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location = DeviceLocation(s_);
    return DRIVER_CALL(s_, cuMemPoolCreate, &pool_, &props);
  }
  Outcome Allocate(uint64_t bytes, Allocation* out, CUresult* refusal) override {
    const auto& d = s_.driver();
    *refusal = own_pool_ ? d.cuMemAllocFromPoolAsync(&out->ptr, bytes, pool_, stream_)
                         : d.cuMemAllocAsync(&out->ptr, bytes, stream_);
    out->bytes = bytes;
    if (*refusal != CUDA_SUCCESS) return Outcome::kRefused;
    return DRIVER_CALL(s_, cuStreamSynchronize, stream_) ? Outcome::kObtained : Outcome::kFailed;
  }
  bool Free(const Allocation& a) override {
    return DRIVER_CALL(s_, cuMemFreeAsync, a.ptr, stream_) && DRIVER_CALL(s_, cuStreamSynchronize, stream_);
  }
  bool Finish() override { return pool_ == nullptr || DRIVER_CALL(s_, cuMemPoolDestroy, pool_); }

 private:
  CUstream stream_;
  bool own_pool_;
  CUmemoryPool pool_ = nullptr;
};

// Virtual memory management: physical memory from cuMemCreate (the allocating call), mapped
// into an address range of its own.
class VmmAllocator : public Allocator {
 public:
  explicit VmmAllocator(const Session& s) : Allocator(s) {}
  bool Prepare() override {
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location = DeviceLocation(s_);
    return DRIVER_CALL(s_, cuMemGetAllocationGranularity, &granularity_, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  }
  Outcome Allocate(uint64_t bytes, Allocation* out, CUresult* refusal) override {
    const uint64_t g = std::max<uint64_t>(granularity_, 1);
    out->bytes = (bytes + g - 1) / g * g;
    *refusal = s_.driver().cuMemCreate(&out->handle, out->bytes, &prop_, 0);
    if (*refusal != CUDA_SUCCESS) return Outcome::kRefused;
    if (!DRIVER_CALL(s_, cuMemAddressReserve, &out->ptr, out->bytes, 0, 0, 0)) return Outcome::kFailed;
    if (!DRIVER_CALL(s_, cuMemMap, out->ptr, out->bytes, 0, out->handle, 0)) return Outcome::kFailed;
    CUmemAccessDesc access = {};
    access.location = DeviceLocation(s_);
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return DRIVER_CALL(s_, cuMemSetAccess, out->ptr, out->bytes, &access, 1) ? Outcome::kObtained : Outcome::kFailed;
  }
  bool Free(const Allocation& a) override {
    return DRIVER_CALL(s_, cuMemUnmap, a.ptr, a.bytes) && DRIVER_CALL(s_, cuMemRelease, a.handle) &&
           DRIVER_CALL(s_, cuMemAddressFree, a.ptr, a.bytes);
  }

 private:
  CUmemAllocationProp prop_ = {};
  size_t granularity_ = 0;
};

class ArrayAllocator : public Allocator {
 public:
  explicit ArrayAllocator(const Session& s) : Allocator(s) {}
  Outcome Allocate(uint64_t bytes, Allocation* out, CUresult* refusal) override {
    const Shape2D shape = RowsFor(bytes);
    CUDA_ARRAY_DESCRIPTOR desc = {};
    desc.Width = shape.width;
    desc.Height = shape.height;
    desc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    desc.NumChannels = 1;
    out->bytes = static_cast<uint64_t>(shape.width) * shape.height;
    *refusal = s_.driver().cuArrayCreate(&out->array, &desc);
    return *refusal == CUDA_SUCCESS ? Outcome::kObtained : Outcome::kRefused;
  }
  bool Free(const Allocation& a) override { return DRIVER_CALL(s_, cuArrayDestroy, a.array); }
};

}  // namespace

// For pitched memory, bytes is pitch × height: the padding is written too.
bool Allocator::Touch(const Allocation& a) const { return DRIVER_CALL(s_, cuMemsetD8, a.ptr, kTouchByte, a.bytes); }

std::unique_ptr<Allocator> MakeAllocator(MemoryApi api, const Session& session, CUstream stream) {
  switch (api) {
    case MemoryApi::kAlloc: return std::make_unique<LinearAllocator>(session, false);
    case MemoryApi::kManaged: return std::make_unique<LinearAllocator>(session, true);
    case MemoryApi::kPitch: return std::make_unique<PitchAllocator>(session);
    case MemoryApi::kAsync: return std::make_unique<StreamOrderedAllocator>(session, stream, false);
    case MemoryApi::kPool: return std::make_unique<StreamOrderedAllocator>(session, stream, true);
    case MemoryApi::kVmm: return std::make_unique<VmmAllocator>(session);
    case MemoryApi::kArray: return std::make_unique<ArrayAllocator>(session);
  }
  return nullptr;
}

}  // namespace gpuslice::workload
