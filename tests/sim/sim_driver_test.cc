// The simulated driver behaves like the real one where gpuslice depends on it: error codes,
// the device model, memory capacity shared by every process, asynchronous in-order streams,
// events, per-thread default streams and byte-exact copies.
#include <cuda.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gpuslice/sim_query.h"
#include "tests/support/sim_driver_helpers.h"
#include "tests/support/test_env.h"

// The per-thread-stream entry points, as a program compiled with
// --default-stream per-thread calls them (cuda.h declares them only in that mode).
#include <cudaTypedefs.h>
#include <type_traits>
extern "C" {
std::remove_pointer_t<PFN_cuLaunchKernel_v7000_ptsz> cuLaunchKernel_ptsz;
std::remove_pointer_t<PFN_cuStreamQuery_v7000_ptsz> cuStreamQuery_ptsz;
std::remove_pointer_t<PFN_cuStreamSynchronize_v7000_ptsz> cuStreamSynchronize_ptsz;
}

namespace gpuslice::testing {
namespace {

using SimDriverTest = SimTest;

constexpr uint64_t kMi = 1ULL << 20;

TEST_F(SimDriverTest, CallsBeforeCuInitReturnNotInitialized) {
  CUdeviceptr p = 0;
  int count = 0;
  EXPECT_EQ(cuMemAlloc(&p, 1024), CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED);
  int version = 0;
  EXPECT_CU(cuDriverGetVersion(&version));  // allowed before cuInit
  EXPECT_EQ(version, CUDA_VERSION);
}

TEST_F(SimDriverTest, CallsWithoutCurrentContextReturnInvalidContext) {
  ASSERT_CU(cuInit(0));
  CUdeviceptr p = 0;
  size_t free = 0, total = 0;
  EXPECT_EQ(cuMemAlloc(&p, 1024), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuMemGetInfo(&free, &total), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(SimDriverTest, BadArgumentsReturnInvalidValue) {
  CUcontext ctx;
  CUfunction spin = InitAndLoadSpin(&ctx);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemAlloc(nullptr, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuInit(7), CUDA_ERROR_INVALID_VALUE);
  uint64_t ns = 10;
  void* params[] = {&ns};
  EXPECT_EQ(cuLaunchKernel(spin, 0, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(spin, 1, 1, 1, 2048, 1, 1, 0, nullptr, params, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(0xdead0000), CUDA_ERROR_INVALID_VALUE);
  CUdevice dev;
  EXPECT_EQ(cuDeviceGet(&dev, 5), CUDA_ERROR_INVALID_DEVICE);
  CUmodule module;
  CUfunction f;
  ASSERT_CU(cuModuleLoadData(&module, kTestPtx));
  EXPECT_EQ(cuModuleGetFunction(&f, module, "missing"), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(cuModuleLoadData(&module, "not ptx"), CUDA_ERROR_INVALID_PTX);
}

TEST_F(SimDriverTest, DestroyedHandlesAreRejected) {
  CUfunction spin = InitAndLoadSpin();
  CUstream stream;
  ASSERT_CU(cuStreamCreate(&stream, 0));
  ASSERT_CU(cuStreamDestroy(stream));
  EXPECT_EQ(LaunchSpin(spin, 1000, stream), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamSynchronize(stream), CUDA_ERROR_INVALID_HANDLE);
  CUevent event;
  ASSERT_CU(cuEventCreate(&event, 0));
  ASSERT_CU(cuEventDestroy(event));
  EXPECT_EQ(cuEventQuery(event), CUDA_ERROR_INVALID_HANDLE);
  CUcontext ctx;
  ASSERT_CU(cuCtxCreate(&ctx, nullptr, 0, 0));
  ASSERT_CU(cuCtxDestroy(ctx));
  EXPECT_EQ(cuCtxPushCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(SimDriverTest, DeviceModelComesFromTheEnvironment) {
  SetEnv("GPUSLICE_SIM_DEVICES", "2");
  SetEnv("GPUSLICE_SIM_MEMORY", "24Gi");
  SetEnv("GPUSLICE_SIM_NAME", "Test GPU");
  SetEnv("GPUSLICE_SIM_SM_COUNT", "66");
  SetEnv("GPUSLICE_SIM_COMPUTE_CAPABILITY", "8.6");
  ASSERT_CU(cuInit(0));
  int count = 0;
  ASSERT_CU(cuDeviceGetCount(&count));
  ASSERT_EQ(count, 2);
  char name[64];
  ASSERT_CU(cuDeviceGetName(name, sizeof name, 1));
  EXPECT_STREQ(name, "Test GPU");
  size_t total = 0;
  ASSERT_CU(cuDeviceTotalMem(&total, 0));
  EXPECT_EQ(total, 24ULL << 30);
  int sms = 0, major = 0, minor = 0;
  ASSERT_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  ASSERT_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  ASSERT_CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
  EXPECT_EQ(sms, 66);
  EXPECT_EQ(major, 8);
  EXPECT_EQ(minor, 6);
  CUuuid a, b;
  ASSERT_CU(cuDeviceGetUuid(&a, 0));
  ASSERT_CU(cuDeviceGetUuid(&b, 1));
  EXPECT_NE(std::memcmp(a.bytes, b.bytes, 16), 0);
  // UUIDs are stable: the query API (another mapping of the same devices) agrees.
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  char expected[8];
  std::snprintf(expected, sizeof expected, "GPU-%02x", a.bytes[0]);
  EXPECT_EQ(snap.devices[0].uuid.substr(0, 6), expected);
}

TEST_F(SimDriverTest, InvalidSimulatorVariableFailsCuInit) {
  SetEnv("GPUSLICE_SIM_MEMORY", "lots");
  EXPECT_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

TEST_F(SimDriverTest, IncompatibleStateFileIsRefused) {
  const int fd = open(state_path().c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  const std::string junk(4096, 'x');
  ASSERT_EQ(write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  close(fd);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

TEST_F(SimDriverTest, CopiesAndMemsetsRoundTripRealBytes) {
  InitAndLoadSpin();
  constexpr size_t kBytes = 1 << 20;
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAlloc(&a, kBytes));
  ASSERT_CU(cuMemAlloc(&b, kBytes));
  std::vector<uint8_t> host(kBytes), back(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) host[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_CU(cuMemcpyHtoD(a, host.data(), kBytes));
  ASSERT_CU(cuMemcpyDtoD(b, a, kBytes));
  ASSERT_CU(cuMemcpyDtoH(back.data(), b, kBytes));
  EXPECT_EQ(host, back);
  ASSERT_CU(cuMemsetD32(a, 0xA5A5A5A5u, kBytes / 4));
  CUstream stream;
  ASSERT_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuMemcpyDtoHAsync(back.data(), a, kBytes, stream));
  ASSERT_CU(cuStreamSynchronize(stream));
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(back[i], 0xA5) << i;
  // A copy that runs past the end of an allocation is refused, not performed.
  EXPECT_EQ(cuMemcpyHtoD(a + 16, host.data(), kBytes), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SimDriverTest, AllocationsBeyondCapacityReturnOutOfMemory) {
  SetEnv("GPUSLICE_SIM_MEMORY", "1Gi");
  InitAndLoadSpin();
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAlloc(&a, 768 * kMi));
  EXPECT_EQ(cuMemAlloc(&b, 512 * kMi), CUDA_ERROR_OUT_OF_MEMORY);
  size_t free = 0, total = 0;
  ASSERT_CU(cuMemGetInfo(&free, &total));
  EXPECT_EQ(total, 1024 * kMi);
  EXPECT_EQ(free, 256 * kMi);
  ASSERT_CU(cuMemFree(a));
  EXPECT_CU(cuMemAlloc(&b, 512 * kMi));  // a free makes room at once
}

TEST_F(SimDriverTest, CapacityIsSharedByEveryProcessAndReturnedWhenOneIsKilled) {
  SetEnv("GPUSLICE_SIM_MEMORY", "1Gi");
  ForkedChild child([](int fd) {
    CUcontext ctx;
    CUdeviceptr p;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
    if (cuMemAlloc(&p, 600 * kMi) != CUDA_SUCCESS) return 2;
    Signal(fd);
    pause();
    return 0;
  });
  ASSERT_TRUE(child.WaitSignal());
  InitAndLoadSpin();
  size_t free = 0, total = 0;
  ASSERT_CU(cuMemGetInfo(&free, &total));
  EXPECT_EQ(free, 424 * kMi);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, 500 * kMi), CUDA_ERROR_OUT_OF_MEMORY);

  child.Kill(SIGKILL);
  child.Wait();
  const uint64_t deadline = MonotonicNanos() + 1'000'000'000ULL;
  do {
    ASSERT_CU(cuMemGetInfo(&free, &total));
  } while (free != total && MonotonicNanos() < deadline);
  EXPECT_EQ(free, total) << "a SIGKILLed process's memory must be returned within a second";
  EXPECT_CU(cuMemAlloc(&p, 900 * kMi));
}

TEST_F(SimDriverTest, LaunchesReturnAtOnceAndStreamsCompleteInOrder) {
  CUfunction spin = InitAndLoadSpin();
  CUstream stream;
  ASSERT_CU(cuStreamCreate(&stream, 0));
  std::vector<int> order;
  std::mutex order_mutex;
  struct Step {
    std::vector<int>* order;
    std::mutex* mutex;
    int value;
  } steps[3] = {{&order, &order_mutex, 1}, {&order, &order_mutex, 2}, {&order, &order_mutex, 3}};
  auto record = [](void* p) {
    auto* s = static_cast<Step*>(p);
    std::lock_guard<std::mutex> lock(*s->mutex);
    s->order->push_back(s->value);
  };
  const uint64_t start = MonotonicNanos();
  ASSERT_CU(cuLaunchHostFunc(stream, record, &steps[0]));
  ASSERT_CU(LaunchSpin(spin, 200'000'000, stream));
  ASSERT_CU(cuLaunchHostFunc(stream, record, &steps[1]));
  ASSERT_CU(LaunchSpin(spin, 10'000'000, stream));
  ASSERT_CU(cuLaunchHostFunc(stream, record, &steps[2]));
  const uint64_t submitted = MonotonicNanos();
  EXPECT_LT(submitted - start, 100'000'000ULL) << "launches must not wait for the kernel";
  EXPECT_EQ(cuStreamQuery(stream), CUDA_ERROR_NOT_READY);
  ASSERT_CU(cuStreamSynchronize(stream));
  EXPECT_GE(MonotonicNanos() - start, 205'000'000ULL);
  EXPECT_CU(cuStreamQuery(stream));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST_F(SimDriverTest, EventsTrackCompletionAndMeasureKernelTime) {
  CUfunction spin = InitAndLoadSpin();
  CUstream stream;
  CUevent begin, end;
  ASSERT_CU(cuStreamCreate(&stream, 0));
  ASSERT_CU(cuEventCreate(&begin, 0));
  ASSERT_CU(cuEventCreate(&end, 0));
  EXPECT_CU(cuEventQuery(end));  // never recorded: complete
  ASSERT_CU(cuEventRecord(begin, stream));
  ASSERT_CU(LaunchSpin(spin, 100'000'000, stream));
  ASSERT_CU(cuEventRecord(end, stream));
  EXPECT_EQ(cuEventQuery(end), CUDA_ERROR_NOT_READY);
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime(&ms, begin, end), CUDA_ERROR_NOT_READY);
  ASSERT_CU(cuEventSynchronize(end));
  EXPECT_CU(cuEventQuery(end));
  ASSERT_CU(cuEventElapsedTime(&ms, begin, end));
  EXPECT_GE(ms, 99.0f);
  EXPECT_LT(ms, 400.0f);
  // Another stream waits for the event before running its own work.
  CUstream other;
  ASSERT_CU(cuStreamCreate(&other, 0));
  ASSERT_CU(LaunchSpin(spin, 80'000'000, stream));
  ASSERT_CU(cuEventRecord(end, stream));
  ASSERT_CU(cuStreamWaitEvent(other, end, 0));
  const uint64_t start = MonotonicNanos();
  ASSERT_CU(cuStreamSynchronize(other));
  EXPECT_GE(MonotonicNanos() - start, 70'000'000ULL);
}

TEST_F(SimDriverTest, PerThreadDefaultStreamsAreSeparateFromTheLegacyStream) {
  CUcontext ctx;
  CUfunction spin = InitAndLoadSpin(&ctx);
  // Stream 0 through a _ptsz entry point is this thread's own stream.
  uint64_t ns = 300'000'000;
  void* params[] = {&ns};
  ASSERT_CU(cuLaunchKernel_ptsz(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  EXPECT_EQ(cuStreamQuery_ptsz(nullptr), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
  EXPECT_CU(cuStreamQuery(nullptr));  // the legacy stream has nothing queued
  CUresult other_thread = CUDA_ERROR_UNKNOWN;
  std::thread t([&] {
    cuCtxSetCurrent(ctx);
    other_thread = cuStreamQuery_ptsz(nullptr);  // another thread, another stream
  });
  t.join();
  EXPECT_EQ(other_thread, CUDA_SUCCESS);
  ASSERT_CU(cuStreamSynchronize_ptsz(nullptr));
  EXPECT_CU(cuStreamQuery(CU_STREAM_PER_THREAD));
}

TEST_F(SimDriverTest, ContextSynchronizeWaitsForEveryStream) {
  CUfunction spin = InitAndLoadSpin();
  CUstream a, b;
  ASSERT_CU(cuStreamCreate(&a, 0));
  ASSERT_CU(cuStreamCreate(&b, 0));
  ASSERT_CU(LaunchSpin(spin, 50'000'000, a));
  ASSERT_CU(LaunchSpin(spin, 50'000'000, b));
  const uint64_t start = MonotonicNanos();
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_GE(MonotonicNanos() - start, 90'000'000ULL) << "one device: kernels of a context run one at a time";
  EXPECT_CU(cuStreamQuery(a));
  EXPECT_CU(cuStreamQuery(b));
}

TEST_F(SimDriverTest, ForkedChildStartsUninitialised) {
  InitAndLoadSpin();
  ForkedChild child([](int) {
    CUdeviceptr p;
    if (cuMemAlloc(&p, 64) != CUDA_ERROR_NOT_INITIALIZED) return 1;
    CUcontext ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 2;
    return cuMemAlloc(&p, 64) == CUDA_SUCCESS ? 0 : 3;
  });
  EXPECT_EQ(child.Wait(), 0);
}

TEST_F(SimDriverTest, GroundTruthRecordsBusyTimeAndKernels) {
  CUfunction spin = InitAndLoadSpin();
  for (int i = 0; i < 5; ++i) ASSERT_CU(LaunchSpin(spin, 20'000'000));
  ASSERT_CU(cuCtxSynchronize());
  simquery::Snapshot snap;
  std::string error;
  ASSERT_TRUE(simquery::TakeSnapshot(state_path(), &snap, &error)) << error;
  ASSERT_EQ(snap.devices[0].processes.size(), 1u);
  const auto& me = snap.devices[0].processes[0];
  EXPECT_EQ(me.pid, getpid());
  EXPECT_TRUE(me.live);
  EXPECT_EQ(me.kernels, 5u);
  EXPECT_GE(me.busy_ns, 100'000'000u);
  EXPECT_LT(me.busy_ns, 200'000'000u);
}

}  // namespace
}  // namespace gpuslice::testing
