// The simulated driver's allocation families beyond cuMemAlloc: stream-ordered pools, virtual
// memory management and CUDA arrays. Each charges the simulated device (cuMemGetInfo and the
// simulator's per-process memory_used), gives memory back when it should, fails with
// OUT_OF_MEMORY at the device's capacity and reports the driver's error codes.
#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gpuslice/sim_query.h"
#include "tests/support/test_env.h"

namespace {

constexpr uint64_t kMiB = 1ULL << 20;
constexpr uint64_t kDeviceMemory = 1024 * kMiB;

uint64_t Rounded512(uint64_t bytes) { return (bytes + 511) & ~uint64_t{511}; }

class MemoryFamiliesTest : public gpuslice::testing::SimTest {
 protected:
  // A fresh 1 GiB device; with a current (primary) context unless `with_context` is false.
  void StartDevice(bool with_context = true) {
    SetEnv("GPUSLICE_SIM_MEMORY", "1Gi");
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    if (!with_context) return;
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
    ASSERT_EQ(ProcessMemory(), 0u) << "the device should start empty (no context overhead configured)";
  }

  // Device memory this process holds, per the simulator's ground truth.
  uint64_t ProcessMemory() {
    gpuslice::simquery::Snapshot snapshot;
    std::string error;
    EXPECT_TRUE(gpuslice::simquery::TakeSnapshot(state_path(), &snapshot, &error)) << error;
    if (snapshot.devices.empty()) return UINT64_MAX;
    for (const auto& p : snapshot.devices[0].processes)
      if (p.live && p.pid == getpid()) return p.memory_used;
    return 0;
  }

  // cuMemGetInfo's free bytes (needs a current context).
  uint64_t FreeBytes() {
    size_t free = 0, total = 0;
    EXPECT_EQ(cuMemGetInfo(&free, &total), CUDA_SUCCESS);
    EXPECT_EQ(total, kDeviceMemory);
    return free;
  }

  // The device bytes this process holds, checked two ways (cuMemGetInfo and the snapshot).
  void ExpectCharged(uint64_t bytes) {
    EXPECT_EQ(ProcessMemory(), bytes);
    EXPECT_EQ(FreeBytes(), kDeviceMemory - bytes);
  }

  static uint64_t PoolAttribute(CUmemoryPool pool, CUmemPool_attribute attr) {
    cuuint64_t value = 0;
    EXPECT_EQ(cuMemPoolGetAttribute(pool, attr, &value), CUDA_SUCCESS);
    return value;
  }
  static uint64_t Reserved(CUmemoryPool pool) { return PoolAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT); }
  static uint64_t Used(CUmemoryPool pool) { return PoolAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT); }

  static CUmemoryPool DefaultPool() {
    CUmemoryPool pool = nullptr;
    EXPECT_EQ(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
    return pool;
  }

  static void SetThreshold(CUmemoryPool pool, uint64_t bytes) {
    cuuint64_t value = bytes;
    ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &value), CUDA_SUCCESS);
  }

  static CUmemAllocationProp DeviceProp(int device = 0) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
  }

  static CUmemAccessDesc ReadWrite(int device = 0) {
    CUmemAccessDesc desc{};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = device;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return desc;
  }

  CUcontext ctx_ = nullptr;
};

// The permissions ("rw-s", "---s", ...) /proc/self/maps shows for the page holding `addr`.
std::string PagePermissions(CUdeviceptr addr) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long start = 0, end = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s", &start, &end, perms) == 3 && addr >= start && addr < end)
      return perms;
  }
  return "unmapped";
}

// ---- Error codes common to the families ----

TEST_F(MemoryFamiliesTest, EveryFamilyReportsNotInitializedBeforeCuInit) {
  CUdeviceptr ptr = 0;
  EXPECT_EQ(cuMemAllocAsync(&ptr, kMiB, nullptr), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cuMemFreeAsync(0x1000, nullptr), CUDA_ERROR_NOT_INITIALIZED);
  CUmemoryPool pool = nullptr;
  EXPECT_EQ(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_ERROR_NOT_INITIALIZED);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  EXPECT_EQ(cuMemPoolCreate(&pool, &props), CUDA_ERROR_NOT_INITIALIZED);

  const CUmemAllocationProp prop = DeviceProp();
  size_t granularity = 0;
  EXPECT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_ERROR_NOT_INITIALIZED);
  CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cuMemAddressReserve(&ptr, 2 * kMiB, 0, 0, 0), CUDA_ERROR_NOT_INITIALIZED);

  CUarray array = nullptr;
  CUDA_ARRAY_DESCRIPTOR desc{64, 64, CU_AD_FORMAT_FLOAT, 1};
  EXPECT_EQ(cuArrayCreate(&array, &desc), CUDA_ERROR_NOT_INITIALIZED);
  CUDA_ARRAY3D_DESCRIPTOR desc3{64, 64, 4, CU_AD_FORMAT_FLOAT, 1, 0};
  EXPECT_EQ(cuArray3DCreate(&array, &desc3), CUDA_ERROR_NOT_INITIALIZED);
  CUmipmappedArray mipmap = nullptr;
  EXPECT_EQ(cuMipmappedArrayCreate(&mipmap, &desc3, 1), CUDA_ERROR_NOT_INITIALIZED);
}

TEST_F(MemoryFamiliesTest, ContextBoundCallsReportInvalidContextWithoutOne) {
  StartDevice(/*with_context=*/false);
  CUdeviceptr ptr = 0;
  EXPECT_EQ(cuMemAllocAsync(&ptr, kMiB, nullptr), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuMemFreeAsync(0x1000, nullptr), CUDA_ERROR_INVALID_CONTEXT);
  CUarray array = nullptr;
  CUDA_ARRAY_DESCRIPTOR desc{64, 64, CU_AD_FORMAT_FLOAT, 1};
  EXPECT_EQ(cuArrayCreate(&array, &desc), CUDA_ERROR_INVALID_CONTEXT);
  CUDA_ARRAY3D_DESCRIPTOR desc3{64, 64, 4, CU_AD_FORMAT_FLOAT, 1, 0};
  EXPECT_EQ(cuArray3DCreate(&array, &desc3), CUDA_ERROR_INVALID_CONTEXT);
  CUmipmappedArray mipmap = nullptr;
  EXPECT_EQ(cuMipmappedArrayCreate(&mipmap, &desc3, 1), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(ProcessMemory(), 0u);

  // Pools and virtual memory belong to devices, not contexts: no context needed.
  CUmemoryPool pool = nullptr;
  EXPECT_EQ(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
  const CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(ProcessMemory(), 2 * kMiB);
  EXPECT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(ProcessMemory(), 0u);
}

// ---- Stream-ordered allocation ----

TEST_F(MemoryFamiliesTest, PoolAllocationReservesAChunkAndReleasesItAtSynchronize) {
  StartDevice();
  CUmemoryPool pool = DefaultPool();
  CUmemoryPool current = nullptr;
  ASSERT_EQ(cuDeviceGetMemPool(&current, 0), CUDA_SUCCESS);
  EXPECT_EQ(current, pool);
  EXPECT_EQ(PoolAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0u) << "default release threshold";

  CUdeviceptr ptr = 0;
  ASSERT_EQ(cuMemAllocAsync(&ptr, kMiB + 100, nullptr), CUDA_SUCCESS);
  ASSERT_NE(ptr, 0u);
  // The pool reserves a 2 MiB chunk; the allocation uses its size rounded to 512 bytes.
  EXPECT_EQ(Reserved(pool), 2 * kMiB);
  EXPECT_EQ(Used(pool), Rounded512(kMiB + 100));
  ExpectCharged(2 * kMiB);

  // Usable in stream order: bytes round-trip through it.
  std::vector<unsigned char> in(kMiB + 100), out(kMiB + 100, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7);
  ASSERT_EQ(cuMemcpyHtoD(ptr, in.data(), in.size()), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), ptr, out.size()), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  size_t size = 0;
  CUdeviceptr base = 0;
  ASSERT_EQ(cuMemGetAddressRange(&base, &size, ptr + 10), CUDA_SUCCESS);
  EXPECT_EQ(base, ptr);
  EXPECT_EQ(size, kMiB + 100);

  ASSERT_EQ(cuMemFreeAsync(ptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  // Above the (zero) release threshold: the synchronisation gave the chunk back.
  EXPECT_EQ(Used(pool), 0u);
  EXPECT_EQ(Reserved(pool), 0u);
  ExpectCharged(0);
  EXPECT_EQ(PoolAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 2 * kMiB);
  EXPECT_EQ(PoolAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), Rounded512(kMiB + 100));

  // High watermarks reset "to zero": they restart from the current value.
  cuuint64_t zero = 0;
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero), CUDA_SUCCESS);
  ASSERT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), CUDA_SUCCESS);
  EXPECT_EQ(PoolAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0u);
  EXPECT_EQ(PoolAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0u);
}

TEST_F(MemoryFamiliesTest, PoolKeepsFreedMemoryUpToTheThresholdAndReusesIt) {
  StartDevice();
  CUmemoryPool pool = DefaultPool();
  SetThreshold(pool, UINT64_MAX);

  CUdeviceptr big = 0;
  ASSERT_EQ(cuMemAllocAsync(&big, 8 * kMiB, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(big, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  // Freed but kept: still reserved, still charged to the device, no longer used.
  EXPECT_EQ(Reserved(pool), 8 * kMiB);
  EXPECT_EQ(Used(pool), 0u);
  ExpectCharged(8 * kMiB);

  // Later allocations that fit reuse the kept memory (split from the same chunk).
  CUdeviceptr a = 0, b = 0, c = 0;
  ASSERT_EQ(cuMemAllocAsync(&a, 4 * kMiB, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAllocAsync(&b, 4 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(a, big);
  EXPECT_EQ(b, big + 4 * kMiB);
  EXPECT_EQ(Reserved(pool), 8 * kMiB);
  EXPECT_EQ(Used(pool), 8 * kMiB);
  ExpectCharged(8 * kMiB);
  // Nothing free fits: the pool grows by one more chunk.
  ASSERT_EQ(cuMemAllocAsync(&c, kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 10 * kMiB);
  EXPECT_EQ(Used(pool), 9 * kMiB);
  ExpectCharged(10 * kMiB);

  for (CUdeviceptr p : {a, b, c}) ASSERT_EQ(cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 10 * kMiB);
  EXPECT_EQ(Used(pool), 0u);
  ExpectCharged(10 * kMiB);

  // Freed neighbours merged: the whole 8 MiB chunk serves one allocation again.
  CUdeviceptr again = 0;
  ASSERT_EQ(cuMemAllocAsync(&again, 8 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(again, big);
  EXPECT_EQ(Reserved(pool), 10 * kMiB);
  // Trimming only releases unused chunks: the 2 MiB one goes, the used 8 MiB one stays.
  ASSERT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 8 * kMiB);
  ExpectCharged(8 * kMiB);
  ASSERT_EQ(cuMemFreeAsync(again, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 8 * kMiB);
  ASSERT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 0u);
  ExpectCharged(0);
}

TEST_F(MemoryFamiliesTest, PoolReleasesDownToTheThresholdAtSynchronize) {
  StartDevice();
  CUmemoryPool pool = DefaultPool();
  SetThreshold(pool, 4 * kMiB);
  std::vector<CUdeviceptr> ptrs(4);
  for (auto& p : ptrs) ASSERT_EQ(cuMemAllocAsync(&p, 2 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 8 * kMiB);
  for (auto p : ptrs) ASSERT_EQ(cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
  // Each 2 MiB allocation filled its own chunk; the synchronisation releases two of the four.
  ASSERT_EQ(cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 4 * kMiB);
  EXPECT_EQ(Used(pool), 0u);
  ExpectCharged(4 * kMiB);
  // Freed memory is not released between synchronisation points.
  CUdeviceptr again = 0;
  ASSERT_EQ(cuMemAllocAsync(&again, 2 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 4 * kMiB);
  ASSERT_EQ(cuMemFreeAsync(again, nullptr), CUDA_SUCCESS);
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  // cuMemPoolTrimTo keeps at most what it is told to.
  ASSERT_EQ(cuMemPoolTrimTo(pool, 3 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 2 * kMiB);
  ExpectCharged(2 * kMiB);
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
}

namespace {
std::atomic<bool> g_release_stream{false};
void CUDA_CB BlockStream(void*) {
  while (!g_release_stream.load()) usleep(1000);
}
}  // namespace

TEST_F(MemoryFamiliesTest, PoolFreeTakesEffectInStreamOrder) {
  StartDevice();
  CUmemoryPool pool = DefaultPool();
  CUstream stream = nullptr;
  ASSERT_EQ(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cuMemAllocAsync(&ptr, kMiB, stream), CUDA_SUCCESS);
  g_release_stream = false;
  ASSERT_EQ(cuLaunchHostFunc(stream, BlockStream, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(ptr, stream), CUDA_SUCCESS);
  // The stream has not reached the free yet: the block is still in use.
  usleep(20000);
  EXPECT_EQ(Used(pool), kMiB);
  // But the pointer is already freed as far as the API is concerned.
  EXPECT_EQ(cuMemFreeAsync(ptr, stream), CUDA_ERROR_INVALID_VALUE);
  g_release_stream = true;
  ASSERT_EQ(cuStreamSynchronize(stream), CUDA_SUCCESS);
  EXPECT_EQ(Used(pool), 0u);
  EXPECT_EQ(Reserved(pool), 0u);
  ExpectCharged(0);
  ASSERT_EQ(cuStreamDestroy(stream), CUDA_SUCCESS);
}

TEST_F(MemoryFamiliesTest, PoolAllocationFailsAtDeviceCapacityAfterReleasingUnusedMemory) {
  StartDevice();
  CUmemoryPool pool = DefaultPool();
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAllocAsync(&a, 768 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemAllocAsync(&b, 512 * kMiB, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(Reserved(pool), 768 * kMiB);
  ExpectCharged(768 * kMiB);

  // Kept (threshold) but unused memory is given back before an allocation fails.
  SetThreshold(pool, UINT64_MAX);
  ASSERT_EQ(cuMemFreeAsync(a, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 768 * kMiB);
  ASSERT_EQ(cuMemAllocAsync(&b, 900 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 900 * kMiB);
  EXPECT_EQ(Used(pool), 900 * kMiB);
  ExpectCharged(900 * kMiB);
  // Other families see the same capacity.
  CUdeviceptr plain = 0;
  EXPECT_EQ(cuMemAlloc(&plain, 200 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemFreeAsync(b, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  ExpectCharged(900 * kMiB);  // kept: below the threshold
  ASSERT_EQ(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
  ExpectCharged(0);
}

TEST_F(MemoryFamiliesTest, ExplicitPoolLifecycle) {
  StartDevice();
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  ASSERT_EQ(cuMemPoolCreate(&pool, &props), CUDA_SUCCESS);
  ASSERT_NE(pool, DefaultPool());

  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(cuMemAllocFromPoolAsync(&a, 3 * kMiB, pool, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(Reserved(pool), 4 * kMiB);
  EXPECT_EQ(Used(pool), 3 * kMiB);
  EXPECT_EQ(Reserved(DefaultPool()), 0u);
  ExpectCharged(4 * kMiB);

  // Made the device's current pool, it serves cuMemAllocAsync.
  ASSERT_EQ(cuDeviceSetMemPool(0, pool), CUDA_SUCCESS);
  CUmemoryPool current = nullptr;
  ASSERT_EQ(cuDeviceGetMemPool(&current, 0), CUDA_SUCCESS);
  EXPECT_EQ(current, pool);
  ASSERT_EQ(cuMemAllocAsync(&b, kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(b, a + 3 * kMiB) << "carved from the rest of the pool's chunk";
  EXPECT_EQ(Reserved(pool), 4 * kMiB);
  EXPECT_EQ(Used(pool), 4 * kMiB);

  // Destroyed with allocations outstanding: the handle is gone at once, the memory stays until
  // they are freed, and the default pool is current again.
  ASSERT_EQ(cuMemPoolDestroy(pool), CUDA_SUCCESS);
  ASSERT_EQ(cuDeviceGetMemPool(&current, 0), CUDA_SUCCESS);
  EXPECT_EQ(current, DefaultPool());
  cuuint64_t value = 0;
  EXPECT_EQ(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocFromPoolAsync(&a, kMiB, pool, nullptr), CUDA_ERROR_INVALID_VALUE);
  ExpectCharged(4 * kMiB);
  std::vector<unsigned char> bytes(kMiB, 0x5a);
  EXPECT_EQ(cuMemcpyHtoD(b, bytes.data(), bytes.size()), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(a, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuMemFreeAsync(b, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  ExpectCharged(0);
}

TEST_F(MemoryFamiliesTest, PoolCallsRejectBadArguments) {
  StartDevice();
  CUmemoryPool pool = DefaultPool();
  CUdeviceptr ptr = 0;
  EXPECT_EQ(cuMemAllocAsync(nullptr, kMiB, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocAsync(&ptr, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
  auto* bogus = reinterpret_cast<CUmemoryPool>(0x1234);
  EXPECT_EQ(cuMemAllocFromPoolAsync(&ptr, kMiB, bogus, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAllocFromPoolAsync(&ptr, kMiB, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolTrimTo(bogus, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE) << "the default pool cannot be destroyed";
  EXPECT_EQ(cuDeviceGetDefaultMemPool(&pool, 3), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cuDeviceSetMemPool(0, bogus), CUDA_ERROR_INVALID_HANDLE);

  // Frees: only the start of a live pool allocation.
  EXPECT_EQ(cuMemFreeAsync(0, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr plain = 0;
  ASSERT_EQ(cuMemAlloc(&plain, kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(plain, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemAllocAsync(&ptr, kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(ptr + 512, nullptr), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemFreeAsync(ptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFreeAsync(ptr, nullptr), CUDA_ERROR_INVALID_VALUE) << "double free";
  ASSERT_EQ(cuMemFree(plain), CUDA_SUCCESS);

  // Attributes: *_CURRENT are read-only, watermarks only reset to zero.
  cuuint64_t value = 5;
  EXPECT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &value), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &value), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &value), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolGetAttribute(pool, static_cast<CUmemPool_attribute>(999), &value), CUDA_ERROR_INVALID_VALUE);
  int reuse = 0;
  ASSERT_EQ(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse), CUDA_SUCCESS);
  EXPECT_EQ(reuse, 1);

  // Pool properties are validated.
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemoryPool created = nullptr;
  EXPECT_EQ(cuMemPoolCreate(nullptr, &props), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemPoolCreate(&created, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUmemPoolProps bad = props;
  bad.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
  EXPECT_EQ(cuMemPoolCreate(&created, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = props;
  bad.location.type = CU_MEM_LOCATION_TYPE_INVALID;
  EXPECT_EQ(cuMemPoolCreate(&created, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = props;
  bad.location.id = 5;
  EXPECT_EQ(cuMemPoolCreate(&created, &bad), CUDA_ERROR_INVALID_DEVICE);
  bad = props;
  bad.reserved[3] = 1;
  EXPECT_EQ(cuMemPoolCreate(&created, &bad), CUDA_ERROR_INVALID_VALUE);
}

// ---- Virtual memory management ----

TEST_F(MemoryFamiliesTest, VirtualMemoryBytesAreSharedBetweenTwoMappings) {
  StartDevice();
  const CUmemAllocationProp prop = DeviceProp();
  size_t minimum = 0, recommended = 0;
  ASSERT_EQ(cuMemGetAllocationGranularity(&minimum, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
  ASSERT_EQ(cuMemGetAllocationGranularity(&recommended, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), CUDA_SUCCESS);
  EXPECT_EQ(minimum, 2 * kMiB);
  EXPECT_EQ(recommended, 2 * kMiB);

  const size_t size = 4 * kMiB;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, size, &prop, 0), CUDA_SUCCESS);
  ExpectCharged(size);
  CUmemAllocationProp got{};
  ASSERT_EQ(cuMemGetAllocationPropertiesFromHandle(&got, handle), CUDA_SUCCESS);
  EXPECT_EQ(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(got.location.id, 0);

  CUdeviceptr va1 = 0, va2 = 0;
  ASSERT_EQ(cuMemAddressReserve(&va1, size, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressReserve(&va2, 2 * size, 16 * kMiB, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(va1 % (2 * kMiB), 0u);
  EXPECT_EQ(va2 % (16 * kMiB), 0u) << "alignment honoured";
  ASSERT_EQ(cuMemMap(va1, size, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va2 + size, size, 0, handle, 0), CUDA_SUCCESS);
  // Mapping does not charge again; it is inaccessible until cuMemSetAccess.
  ExpectCharged(size);
  EXPECT_EQ(PagePermissions(va1).substr(0, 3), "---");
  const CUmemAccessDesc rw = ReadWrite();
  ASSERT_EQ(cuMemSetAccess(va1, size, &rw, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetAccess(va2 + size, size, &rw, 1), CUDA_SUCCESS);
  EXPECT_EQ(PagePermissions(va1).substr(0, 3), "rw-");
  unsigned long long flags = 0;
  ASSERT_EQ(cuMemGetAccess(&flags, &rw.location, va2 + size + 4096), CUDA_SUCCESS);
  EXPECT_EQ(flags, static_cast<unsigned long long>(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));

  // Bytes written through one mapping are read through the other.
  std::vector<unsigned char> in(size), out(size, 0);
  for (size_t i = 0; i < size; ++i) in[i] = static_cast<unsigned char>(i * 31 + 3);
  ASSERT_EQ(cuMemcpyHtoD(va1, in.data(), size), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), va2 + size, size), CUDA_SUCCESS);
  EXPECT_EQ(in, out);
  ASSERT_EQ(cuMemsetD8(va2 + size + 100, 0xab, 10), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH(out.data(), va1, 200), CUDA_SUCCESS);
  EXPECT_EQ(out[99], in[99]);
  EXPECT_EQ(out[100], 0xab);
  EXPECT_EQ(out[109], 0xab);
  EXPECT_EQ(out[110], in[110]);
  // Copies outside a mapping are refused.
  EXPECT_EQ(cuMemcpyHtoD(va2, in.data(), 16), CUDA_ERROR_INVALID_VALUE);

  // The handle behind any mapped address is the one it was mapped with.
  CUmemGenericAllocationHandle retained = 0;
  ASSERT_EQ(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va2 + size + 12345)), CUDA_SUCCESS);
  EXPECT_EQ(retained, handle);
  ASSERT_EQ(cuMemRelease(retained), CUDA_SUCCESS);

  ASSERT_EQ(cuMemUnmap(va1, size), CUDA_SUCCESS);
  ASSERT_EQ(cuMemUnmap(va2 + size, size), CUDA_SUCCESS);
  EXPECT_EQ(cuMemcpyHtoD(va1, in.data(), 16), CUDA_ERROR_INVALID_VALUE);
  ExpectCharged(size);  // the handle still holds the memory
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ExpectCharged(0);
  ASSERT_EQ(cuMemAddressFree(va1, size), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va2, 2 * size), CUDA_SUCCESS);
}

TEST_F(MemoryFamiliesTest, VirtualMemoryGoesWithTheLastHandleAndTheLastMapping) {
  StartDevice();
  const CUmemAllocationProp prop = DeviceProp();
  const CUmemAccessDesc rw = ReadWrite();
  const size_t size = 2 * kMiB;
  CUdeviceptr va = 0;
  ASSERT_EQ(cuMemAddressReserve(&va, 2 * size, 0, 0, 0), CUDA_SUCCESS);

  // Released while mapped: the memory stays (charged, bytes readable) until the unmap.
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cuMemCreate(&handle, size, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, size, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetAccess(va, size, &rw, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuMemsetD32(va, 0xdeadbeef, size / 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cuMemRelease(handle), CUDA_ERROR_INVALID_VALUE) << "no reference left";
  ExpectCharged(size);
  uint32_t word = 0;
  ASSERT_EQ(cuMemcpyDtoH(&word, va + size - 4, 4), CUDA_SUCCESS);
  EXPECT_EQ(word, 0xdeadbeefu);
  // The mapping can still hand out a (new) reference to the same handle value.
  CUmemGenericAllocationHandle retained = 0;
  ASSERT_EQ(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va)), CUDA_SUCCESS);
  EXPECT_EQ(retained, handle);
  ASSERT_EQ(cuMemRelease(retained), CUDA_SUCCESS);
  ExpectCharged(size);
  ASSERT_EQ(cuMemUnmap(va, size), CUDA_SUCCESS);
  ExpectCharged(0);

  // Unmapped first: the handle keeps it.
  ASSERT_EQ(cuMemCreate(&handle, size, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, size, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va + size, size, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemSetAccess(va, 2 * size, &rw, 1), CUDA_SUCCESS) << "one call over two whole mappings";
  ASSERT_EQ(cuMemUnmap(va, 2 * size), CUDA_SUCCESS);
  ExpectCharged(size);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ExpectCharged(0);

  // Freeing the reservation unmaps what is still mapped in it.
  ASSERT_EQ(cuMemCreate(&handle, size, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemMap(va, size, 0, handle, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ExpectCharged(size);
  ASSERT_EQ(cuMemAddressFree(va, 2 * size), CUDA_SUCCESS);
  ExpectCharged(0);
}

TEST_F(MemoryFamiliesTest, VirtualMemoryChargesOnlyDeviceLocatedMemoryAndHitsCapacity) {
  StartDevice();
  CUmemAllocationProp host{};
  host.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  host.location.type = CU_MEM_LOCATION_TYPE_HOST;
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(cuMemCreate(&h, 64 * kMiB, &host, 0), CUDA_SUCCESS);
  ExpectCharged(0);
  ASSERT_EQ(cuMemRelease(h), CUDA_SUCCESS);

  const CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle a = 0, b = 0;
  ASSERT_EQ(cuMemCreate(&a, 768 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemCreate(&b, 512 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ExpectCharged(768 * kMiB);
  ASSERT_EQ(cuMemRelease(a), CUDA_SUCCESS);
  ASSERT_EQ(cuMemCreate(&b, 512 * kMiB, &prop, 0), CUDA_SUCCESS);
  ExpectCharged(512 * kMiB);
  ASSERT_EQ(cuMemRelease(b), CUDA_SUCCESS);
  ExpectCharged(0);
}

TEST_F(MemoryFamiliesTest, VirtualMemoryCallsRejectBadArguments) {
  StartDevice();
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle handle = 0;
  EXPECT_EQ(cuMemCreate(&handle, kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE) << "not a multiple of 2 MiB";
  EXPECT_EQ(cuMemCreate(&handle, 3 * kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemCreate(&handle, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemCreate(&handle, 2 * kMiB, &prop, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemCreate(nullptr, 2 * kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemCreate(&handle, 2 * kMiB, nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  CUmemAllocationProp bad = prop;
  bad.location.id = 4;
  EXPECT_EQ(cuMemCreate(&handle, 2 * kMiB, &bad, 0), CUDA_ERROR_INVALID_DEVICE);
  bad = prop;
  bad.location.type = CU_MEM_LOCATION_TYPE_INVALID;
  EXPECT_EQ(cuMemCreate(&handle, 2 * kMiB, &bad, 0), CUDA_ERROR_INVALID_VALUE);
  bad = prop;
  bad.type = CU_MEM_ALLOCATION_TYPE_INVALID;
  EXPECT_EQ(cuMemCreate(&handle, 2 * kMiB, &bad, 0), CUDA_ERROR_INVALID_VALUE);
  size_t granularity = 0;
  EXPECT_EQ(cuMemGetAllocationGranularity(&granularity, &prop, static_cast<CUmemAllocationGranularity_flags>(7)),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemRelease(0x7777), CUDA_ERROR_INVALID_VALUE);
  CUmemAllocationProp got{};
  EXPECT_EQ(cuMemGetAllocationPropertiesFromHandle(&got, 0x7777), CUDA_ERROR_INVALID_VALUE);
  ExpectCharged(0);

  CUdeviceptr va = 0;
  EXPECT_EQ(cuMemAddressReserve(&va, 100, 0, 0, 0), CUDA_ERROR_INVALID_VALUE) << "not page-sized";
  EXPECT_EQ(cuMemAddressReserve(&va, 2 * kMiB, 3 * kMiB, 0, 0), CUDA_ERROR_INVALID_VALUE) << "alignment";
  EXPECT_EQ(cuMemAddressReserve(nullptr, 2 * kMiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemAddressReserve(&va, 8 * kMiB, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cuMemCreate(&handle, 4 * kMiB, &prop, 0), CUDA_SUCCESS);

  EXPECT_EQ(cuMemMap(va + 4096, 2 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE) << "unaligned address";
  EXPECT_EQ(cuMemMap(va, kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE) << "unaligned size";
  EXPECT_EQ(cuMemMap(va, 2 * kMiB, 4 * kMiB, handle, 0), CUDA_ERROR_INVALID_VALUE) << "beyond the memory";
  EXPECT_EQ(cuMemMap(va + 6 * kMiB, 4 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE) << "beyond the reservation";
  EXPECT_EQ(cuMemMap(va, 2 * kMiB, 0, 0x7777, 0), CUDA_ERROR_INVALID_VALUE) << "unknown handle";
  ASSERT_EQ(cuMemMap(va, 4 * kMiB, 0, handle, 0), CUDA_SUCCESS);
  EXPECT_EQ(cuMemMap(va + 2 * kMiB, 2 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE) << "already mapped";
  ASSERT_EQ(cuMemMap(va + 4 * kMiB, 2 * kMiB, 2 * kMiB, handle, 0), CUDA_SUCCESS) << "at an offset";

  CUmemAccessDesc rw = ReadWrite();
  EXPECT_EQ(cuMemSetAccess(va, 8 * kMiB, &rw, 1), CUDA_ERROR_INVALID_VALUE) << "not fully mapped";
  EXPECT_EQ(cuMemSetAccess(va, 2 * kMiB, &rw, 1), CUDA_ERROR_INVALID_VALUE) << "part of a mapping";
  EXPECT_EQ(cuMemSetAccess(va, 4 * kMiB, &rw, 0), CUDA_ERROR_INVALID_VALUE);
  CUmemAccessDesc bad_access = rw;
  bad_access.location.id = 6;
  EXPECT_EQ(cuMemSetAccess(va, 4 * kMiB, &bad_access, 1), CUDA_ERROR_INVALID_DEVICE);
  ASSERT_EQ(cuMemSetAccess(va, 6 * kMiB, &rw, 1), CUDA_SUCCESS);
  // The mapping at an offset sees the second half of the memory.
  ASSERT_EQ(cuMemsetD8(va + 2 * kMiB, 0x42, 1), CUDA_SUCCESS);
  unsigned char byte = 0;
  ASSERT_EQ(cuMemcpyDtoH(&byte, va + 4 * kMiB, 1), CUDA_SUCCESS);
  EXPECT_EQ(byte, 0x42);

  unsigned long long flags = 0;
  EXPECT_EQ(cuMemGetAccess(&flags, &rw.location, va + 7 * kMiB), CUDA_ERROR_INVALID_VALUE) << "not mapped";
  EXPECT_EQ(cuMemUnmap(va, 2 * kMiB), CUDA_ERROR_INVALID_VALUE) << "part of a mapping";
  EXPECT_EQ(cuMemUnmap(va, 8 * kMiB), CUDA_ERROR_INVALID_VALUE) << "not all mapped";
  EXPECT_EQ(cuMemAddressFree(va, 4 * kMiB), CUDA_ERROR_INVALID_VALUE) << "size must match";
  EXPECT_EQ(cuMemAddressFree(va + 2 * kMiB, 6 * kMiB), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMemUnmap(va, 6 * kMiB), CUDA_SUCCESS);
  ASSERT_EQ(cuMemRelease(handle), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAddressFree(va, 8 * kMiB), CUDA_SUCCESS);
  ExpectCharged(0);
}

// ---- Arrays ----

struct ArrayCase {
  const char* name;
  CUDA_ARRAY3D_DESCRIPTOR desc;
  bool use_2d_api;
  uint64_t bytes;  // the documented estimate
};

TEST_F(MemoryFamiliesTest, ArraysChargeTheirEstimatedSize) {
  StartDevice();
  const ArrayCase cases[] = {
      {"2D float4", {1024, 1024, 0, CU_AD_FORMAT_FLOAT, 4, 0}, true, 1024ull * 1024 * 16},
      {"1D uint8", {1000, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0}, true, 1000},
      {"2D half2", {300, 200, 0, CU_AD_FORMAT_HALF, 2, 0}, false, 300ull * 200 * 4},
      {"3D uint16x2", {64, 64, 64, CU_AD_FORMAT_UNSIGNED_INT16, 2, 0}, false, 64ull * 64 * 64 * 4},
      {"layered 2D", {256, 256, 10, CU_AD_FORMAT_HALF, 1, CUDA_ARRAY3D_LAYERED}, false, 256ull * 256 * 2 * 10},
      {"layered 1D", {4096, 0, 8, CU_AD_FORMAT_SIGNED_INT32, 1, CUDA_ARRAY3D_LAYERED}, false, 4096ull * 4 * 8},
      {"cubemap", {128, 128, 6, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_CUBEMAP}, false, 128ull * 128 * 16 * 6},
      {"BC1", {256, 256, 0, CU_AD_FORMAT_BC1_UNORM, 4, 0}, false, 64ull * 64 * 8},
      {"BC7 odd size", {130, 66, 0, CU_AD_FORMAT_BC7_UNORM, 4, 0}, false, 33ull * 17 * 16},
      {"NV12", {1920, 1080, 0, CU_AD_FORMAT_NV12, 3, 0}, false, 1920ull * 1080 * 3 / 2},
      {"UNORM_INT8X4", {640, 480, 0, CU_AD_FORMAT_UNORM_INT8X4, 4, 0}, false, 640ull * 480 * 4},
      {"sparse", {1024, 1024, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_SPARSE}, false, 0},
  };
  for (const ArrayCase& c : cases) {
    SCOPED_TRACE(c.name);
    CUarray array = nullptr;
    if (c.use_2d_api) {
      CUDA_ARRAY_DESCRIPTOR desc{c.desc.Width, c.desc.Height, c.desc.Format, c.desc.NumChannels};
      ASSERT_EQ(cuArrayCreate(&array, &desc), CUDA_SUCCESS);
      CUDA_ARRAY_DESCRIPTOR got{};
      ASSERT_EQ(cuArrayGetDescriptor(&got, array), CUDA_SUCCESS);
      EXPECT_EQ(got.Width, desc.Width);
      EXPECT_EQ(got.Height, desc.Height);
      EXPECT_EQ(got.Format, desc.Format);
      EXPECT_EQ(got.NumChannels, desc.NumChannels);
    } else {
      ASSERT_EQ(cuArray3DCreate(&array, &c.desc), CUDA_SUCCESS);
      CUDA_ARRAY3D_DESCRIPTOR got{};
      ASSERT_EQ(cuArray3DGetDescriptor(&got, array), CUDA_SUCCESS);
      EXPECT_EQ(0, std::memcmp(&got, &c.desc, sizeof got));
    }
    ExpectCharged(Rounded512(c.bytes));
    ASSERT_EQ(cuArrayDestroy(array), CUDA_SUCCESS);
    ExpectCharged(0);
  }
}

TEST_F(MemoryFamiliesTest, MipmappedArraysChargeTheSumOfTheirLevels) {
  StartDevice();
  CUDA_ARRAY3D_DESCRIPTOR desc{256, 256, 0, CU_AD_FORMAT_FLOAT, 1, 0};
  CUmipmappedArray mipmap = nullptr;
  EXPECT_EQ(cuMipmappedArrayCreate(&mipmap, &desc, 10), CUDA_ERROR_INVALID_VALUE) << "256 has 9 levels";
  EXPECT_EQ(cuMipmappedArrayCreate(&mipmap, &desc, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuMipmappedArrayCreate(&mipmap, &desc, 9), CUDA_SUCCESS);
  uint64_t texels = 0;
  for (uint64_t side = 256; side >= 1; side /= 2) texels += side * side;
  ExpectCharged(Rounded512(texels * 4));

  CUarray level = nullptr;
  ASSERT_EQ(cuMipmappedArrayGetLevel(&level, mipmap, 3), CUDA_SUCCESS);
  CUDA_ARRAY3D_DESCRIPTOR got{};
  ASSERT_EQ(cuArray3DGetDescriptor(&got, level), CUDA_SUCCESS);
  EXPECT_EQ(got.Width, 32u);
  EXPECT_EQ(got.Height, 32u);
  EXPECT_EQ(got.Depth, 0u);
  EXPECT_EQ(cuMipmappedArrayGetLevel(&level, mipmap, 9), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuArrayDestroy(level), CUDA_ERROR_INVALID_HANDLE) << "levels go with their mipmapped array";
  ExpectCharged(Rounded512(texels * 4));
  ASSERT_EQ(cuMipmappedArrayDestroy(mipmap), CUDA_SUCCESS);
  ExpectCharged(0);
  EXPECT_EQ(cuMipmappedArrayDestroy(mipmap), CUDA_ERROR_INVALID_HANDLE);

  // 3D levels halve the depth too; a layered array keeps its layers.
  CUDA_ARRAY3D_DESCRIPTOR volume{64, 32, 16, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
  ASSERT_EQ(cuMipmappedArrayCreate(&mipmap, &volume, 3), CUDA_SUCCESS);
  ExpectCharged(Rounded512(64 * 32 * 16 + 32 * 16 * 8 + 16 * 8 * 4));
  ASSERT_EQ(cuMipmappedArrayDestroy(mipmap), CUDA_SUCCESS);
  CUDA_ARRAY3D_DESCRIPTOR layered{64, 64, 5, CU_AD_FORMAT_UNSIGNED_INT8, 2, CUDA_ARRAY3D_LAYERED};
  ASSERT_EQ(cuMipmappedArrayCreate(&mipmap, &layered, 2), CUDA_SUCCESS);
  ExpectCharged(Rounded512((64 * 64 + 32 * 32) * 2 * 5));
  ASSERT_EQ(cuMipmappedArrayDestroy(mipmap), CUDA_SUCCESS);
  ExpectCharged(0);
}

TEST_F(MemoryFamiliesTest, ArrayCallsRejectBadArgumentsAndFailAtCapacity) {
  StartDevice();
  CUarray array = nullptr;
  CUDA_ARRAY_DESCRIPTOR three_channels{64, 64, CU_AD_FORMAT_FLOAT, 3};
  EXPECT_EQ(cuArrayCreate(&array, &three_channels), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY_DESCRIPTOR no_width{0, 64, CU_AD_FORMAT_FLOAT, 1};
  EXPECT_EQ(cuArrayCreate(&array, &no_width), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY_DESCRIPTOR bad_format{64, 64, static_cast<CUarray_format>(0x77), 1};
  EXPECT_EQ(cuArrayCreate(&array, &bad_format), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY_DESCRIPTOR ok{64, 64, CU_AD_FORMAT_FLOAT, 1};
  EXPECT_EQ(cuArrayCreate(nullptr, &ok), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuArrayCreate(&array, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR cube_not_square{64, 32, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP};
  EXPECT_EQ(cuArray3DCreate(&array, &cube_not_square), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR depth_without_height{64, 0, 4, CU_AD_FORMAT_FLOAT, 1, 0};
  EXPECT_EQ(cuArray3DCreate(&array, &depth_without_height), CUDA_ERROR_INVALID_VALUE);
  CUDA_ARRAY3D_DESCRIPTOR unknown_flag{64, 64, 0, CU_AD_FORMAT_FLOAT, 1, 0x10000};
  EXPECT_EQ(cuArray3DCreate(&array, &unknown_flag), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuArrayDestroy(reinterpret_cast<CUarray>(0x4321)), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuArrayDestroy(nullptr), CUDA_ERROR_INVALID_HANDLE);
  ExpectCharged(0);

  // A 2D descriptor cannot describe a 3D array.
  CUDA_ARRAY3D_DESCRIPTOR volume{16, 16, 16, CU_AD_FORMAT_FLOAT, 1, 0};
  ASSERT_EQ(cuArray3DCreate(&array, &volume), CUDA_SUCCESS);
  CUDA_ARRAY_DESCRIPTOR got{};
  EXPECT_EQ(cuArrayGetDescriptor(&got, array), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuArrayDestroy(array), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayDestroy(array), CUDA_ERROR_INVALID_HANDLE) << "already destroyed";

  // 16384 x 16384 float4 = 4 GiB: more than the device has.
  CUDA_ARRAY_DESCRIPTOR huge{16384, 16384, CU_AD_FORMAT_FLOAT, 4};
  EXPECT_EQ(cuArrayCreate(&array, &huge), CUDA_ERROR_OUT_OF_MEMORY);
  // 8192 x 8192 float2 = 512 MiB fits once, not twice.
  CUDA_ARRAY_DESCRIPTOR half{8192, 8192, CU_AD_FORMAT_FLOAT, 2};
  CUarray first = nullptr, second = nullptr;
  ASSERT_EQ(cuArrayCreate(&first, &half), CUDA_SUCCESS);
  ExpectCharged(512 * kMiB);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cuMemAllocAsync(&ptr, 256 * kMiB, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuArrayCreate(&second, &half), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cuMemFreeAsync(ptr, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuStreamSynchronize(nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuArrayDestroy(first), CUDA_SUCCESS);
  ExpectCharged(0);
}

}  // namespace
