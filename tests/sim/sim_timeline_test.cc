// Short kernels are placed on the device's timeline instead of being waited out on a host core:
// a stream's worker schedules them ahead of real time, and completion (synchronisations, events,
// host functions) still comes no earlier than the device's time allows.
#include <cuda.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "common/clock.h"
#include "tests/support/sim_driver_helpers.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using SimTimelineTest = SimTest;

constexpr int kKernels = 2'000;
constexpr uint64_t kKernelNs = 20'000;
constexpr uint64_t kDeviceNs = kKernels * kKernelNs;  // 40 ms of device time

uint64_t CpuNanos(int who) {
  rusage usage{};
  getrusage(who, &usage);
  const auto ns = [](const timeval& t) {
    return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(t.tv_usec) * 1'000ULL;
  };
  return ns(usage.ru_utime) + ns(usage.ru_stime);
}

// The process's CPU time less the calling thread's: what the driver's own threads (the stream's
// worker) spent.
uint64_t OtherThreadsCpuNanos() { return CpuNanos(RUSAGE_SELF) - CpuNanos(RUSAGE_THREAD); }

void RecordNow(void* out) { *static_cast<uint64_t*>(out) = MonotonicNanos(); }

TEST_F(SimTimelineTest, ShortKernelsCostTheWorkerFarLessCpuThanTheyOccupyTheDevice) {
  CUfunction spin = InitAndLoadSpin();
  CUstream stream;
  ASSERT_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(LaunchSpin(spin, 1'000, stream));  // starts the worker thread outside the measurement
  ASSERT_CU(cuStreamSynchronize(stream));

  const uint64_t cpu_before = OtherThreadsCpuNanos();
  const uint64_t first_launch = MonotonicNanos();
  for (int i = 0; i < kKernels; ++i) ASSERT_CU(LaunchSpin(spin, kKernelNs, stream));
  ASSERT_CU(cuStreamSynchronize(stream));
  const uint64_t synchronized = MonotonicNanos();
  const uint64_t worker_cpu = OtherThreadsCpuNanos() - cpu_before;

  std::printf("%d kernels of %llu us: worker CPU %llu us, launch to synchronised %llu us\n", kKernels,
              static_cast<unsigned long long>(kKernelNs / 1000), static_cast<unsigned long long>(worker_cpu / 1000),
              static_cast<unsigned long long>((synchronized - first_launch) / 1000));
  EXPECT_GE(synchronized - first_launch, kDeviceNs) << "synchronised before the device could finish";
  // Waiting each kernel out spins the worker for all 40 ms; on the timeline it spins only at the
  // ends of turns (one every 2 ms) and at the final hand-over.
  EXPECT_LT(worker_cpu, kDeviceNs / 4) << "worker thread CPU " << worker_cpu / 1000 << " us for " << kDeviceNs / 1000
                                       << " us of device time";
  EXPECT_CU(cuStreamDestroy(stream));
}

TEST_F(SimTimelineTest, EventsAndHostFunctionsCompleteWhenTheDeviceReachesThem) {
  CUfunction spin = InitAndLoadSpin();
  CUstream stream;
  ASSERT_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent start, end;
  ASSERT_CU(cuEventCreate(&start, 0));
  ASSERT_CU(cuEventCreate(&end, 0));
  uint64_t host_function_ran = 0;

  const uint64_t first_launch = MonotonicNanos();
  ASSERT_CU(cuEventRecord(start, stream));
  for (int i = 0; i < kKernels; ++i) ASSERT_CU(LaunchSpin(spin, kKernelNs, stream));
  ASSERT_CU(cuEventRecord(end, stream));
  ASSERT_CU(cuLaunchHostFunc(stream, RecordNow, &host_function_ran));

  // The worker has long scheduled every kernel; the event is still not complete.
  EXPECT_EQ(cuEventQuery(end), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuStreamQuery(stream), CUDA_ERROR_NOT_READY);
  while (cuEventQuery(end) == CUDA_ERROR_NOT_READY) {
  }
  const uint64_t observed = MonotonicNanos();
  EXPECT_GE(observed - first_launch, kDeviceNs) << "event read complete before its kernels could end";
  ASSERT_CU(cuEventSynchronize(end));
  float ms = 0;
  ASSERT_CU(cuEventElapsedTime(&ms, start, end));
  std::printf("events: elapsed %.3f ms, first launch to observed %.3f ms\n", ms, (observed - first_launch) / 1e6);
  EXPECT_GE(ms, kDeviceNs / 1e6);
  EXPECT_LE(ms, (observed - first_launch) / 1e6) << "the events' times are the device's, not ahead of it";

  ASSERT_CU(cuStreamSynchronize(stream));
  EXPECT_GE(host_function_ran - first_launch, kDeviceNs) << "host function ran before the kernels ahead of it";
  EXPECT_CU(cuEventDestroy(start));
  EXPECT_CU(cuEventDestroy(end));
  EXPECT_CU(cuStreamDestroy(stream));
}

// A stream waiting on another stream's event starts its work only when that event's kernels end.
TEST_F(SimTimelineTest, StreamWaitEventOrdersWorkAfterTheEventsTime) {
  CUfunction spin = InitAndLoadSpin();
  CUstream producer, consumer;
  ASSERT_CU(cuStreamCreate(&producer, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamCreate(&consumer, CU_STREAM_NON_BLOCKING));
  CUevent produced;
  ASSERT_CU(cuEventCreate(&produced, 0));
  uint64_t consumer_ran = 0;

  const uint64_t first_launch = MonotonicNanos();
  for (int i = 0; i < kKernels / 4; ++i) ASSERT_CU(LaunchSpin(spin, kKernelNs, producer));
  ASSERT_CU(cuEventRecord(produced, producer));
  ASSERT_CU(cuStreamWaitEvent(consumer, produced, 0));
  ASSERT_CU(cuLaunchHostFunc(consumer, RecordNow, &consumer_ran));
  ASSERT_CU(cuStreamSynchronize(consumer));
  EXPECT_GE(consumer_ran - first_launch, kDeviceNs / 4);
  EXPECT_CU(cuEventDestroy(produced));
  EXPECT_CU(cuStreamDestroy(producer));
  EXPECT_CU(cuStreamDestroy(consumer));
}

// The worker runs ahead of the device, so giving the device back when the process has nothing
// left is a separate step: it must happen when the last kernel ends, not when another process
// takes the device from a holder that seems stuck (two timeslices into its turn).
TEST_F(SimTimelineTest, AnIdleProcessGivesTheDeviceBackWhenItsLastKernelEnds) {
  SetEnv("GPUSLICE_SIM_TIMESLICE_US", "50000");  // a stuck holder is passed over after 100 ms
  // The second process is forked before this one starts threads (TSan refuses a fork after),
  // and runs its kernel when told to.
  int go[2], result[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(result), 0);
  ForkedChild child([&](int ready_fd) {
    close(go[1]);
    close(result[0]);
    CUfunction child_spin = InitAndLoadSpin();
    Signal(ready_fd);
    char c;
    if (read(go[0], &c, 1) != 1) return 1;
    const uint64_t launched = MonotonicNanos();
    if (LaunchSpin(child_spin, 1'000'000) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS) return 2;
    const uint64_t took = MonotonicNanos() - launched;
    return write(result[1], &took, sizeof(took)) == sizeof(took) ? 0 : 3;
  });
  close(go[0]);
  close(result[1]);
  ASSERT_TRUE(child.WaitSignal());

  CUfunction spin = InitAndLoadSpin();
  CUmodule module;
  CUfunction noop;
  ASSERT_CU(cuModuleLoadData(&module, kTestPtx));
  ASSERT_CU(cuModuleGetFunction(&noop, module, "noop"));
  uint64_t host_function_ran = 0;
  for (int i = 0; i < 50; ++i) ASSERT_CU(LaunchSpin(spin, kKernelNs));
  // Host work, then a kernel of no length, last: the device is still given back after it.
  ASSERT_CU(cuLaunchHostFunc(nullptr, RecordNow, &host_function_ran));
  ASSERT_CU(cuLaunchKernel(noop, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  ASSERT_CU(cuCtxSynchronize());

  Signal(go[1]);
  uint64_t took = 0;
  ASSERT_EQ(read(result[0], &took, sizeof(took)), static_cast<ssize_t>(sizeof(took)));
  close(go[1]);
  close(result[0]);
  EXPECT_EQ(child.Wait(), 0);
  std::printf("a second process's 1 ms kernel, launch to synchronised: %llu us\n",
              static_cast<unsigned long long>(took / 1000));
  EXPECT_GE(took, 1'000'000u);
  EXPECT_LT(took, 40'000'000u) << "another process got the idle device only " << took / 1000 << " us after launching";
}

}  // namespace
}  // namespace gpuslice::testing
