// Short kernels are placed on the device's timeline instead of being waited out on a host core:
// a stream's worker schedules them ahead of real time, and completion (synchronisations, events,
// host functions) still comes no earlier than the device's time allows.
#include <cuda.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

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

// The hardware switches contexts at the end of a timeslice whether or not the host is running:
// the next process's turn begins where the holder's ended on the device, even when the holder's
// host thread notices the end late (here: stopped across it). Begun when the host noticed, the
// device sat idle with the next process's kernel queued; on a loaded 2-core machine that idle
// (0.5 to 3 ms before a latency service's kernel) was most of the service's worst requests.
TEST_F(SimTimelineTest, AHandedOverTurnBeginsWhereTheHoldersTurnEndedNotWhenItsHostNoticed) {
  constexpr uint64_t kTimesliceNs = 50'000'000;  // a holder stopped past 100 ms is passed over
  SetEnv("GPUSLICE_SIM_TIMESLICE_US", std::to_string(kTimesliceNs / 1000));
  const std::string log = "/tmp/gpuslice-handover-log-" + std::to_string(getpid()) + ".jsonl";
  std::filesystem::remove(log);
  SetEnv("GPUSLICE_SIM_KERNEL_LOG", log);
  // Both children are forked before this process starts threads (TSan refuses a fork after).
  // Each launches its kernel when told to.
  int go_holder[2], go_next[2];
  ASSERT_EQ(pipe(go_holder), 0);
  ASSERT_EQ(pipe(go_next), 0);
  const auto launcher = [](int go_fd, uint64_t kernel_ns) {
    return [go_fd, kernel_ns](int ready_fd) {
      CUfunction spin = InitAndLoadSpin();
      Signal(ready_fd);
      char c;
      if (read(go_fd, &c, 1) != 1) return 1;
      return LaunchSpin(spin, kernel_ns) == CUDA_SUCCESS && cuCtxSynchronize() == CUDA_SUCCESS ? 0 : 2;
    };
  };
  ForkedChild holder(launcher(go_holder[0], 3 * kTimesliceNs));
  ForkedChild next(launcher(go_next[0], 1'000'000));
  ASSERT_TRUE(holder.WaitSignal());
  ASSERT_TRUE(next.WaitSignal());

  const uint64_t began = MonotonicNanos();
  Signal(go_holder[1]);
  usleep(5'000);
  Signal(go_next[1]);  // waits for the holder's turn to end
  usleep(5'000);
  ASSERT_EQ(kill(holder.pid(), SIGSTOP), 0);
  // Stopped across the end of its turn, resumed well before it would be passed over as stuck.
  while (MonotonicNanos() - began < kTimesliceNs + kTimesliceNs / 2) usleep(1'000);
  ASSERT_EQ(kill(holder.pid(), SIGCONT), 0);
  EXPECT_EQ(holder.Wait(), 0);
  EXPECT_EQ(next.Wait(), 0);
  for (int fd : {go_holder[0], go_holder[1], go_next[0], go_next[1]}) close(fd);

  uint64_t holder_began = UINT64_MAX, next_began = UINT64_MAX;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    uint64_t& first = j["pid"].get<pid_t>() == holder.pid() ? holder_began : next_began;
    first = std::min(first, j["start_ns"].get<uint64_t>());
  }
  std::filesystem::remove(log);
  ASSERT_NE(holder_began, UINT64_MAX);
  ASSERT_NE(next_began, UINT64_MAX);
  const uint64_t after = next_began - holder_began;
  std::printf("the next process's kernel began %.1f ms into the holder's turn of %.0f ms\n", after / 1e6,
              kTimesliceNs / 1e6);
  EXPECT_GE(after, kTimesliceNs) << "the device passed before the holder's turn ended";
  // The holder was resumed a half timeslice after its turn's end: a turn begun then fails this.
  EXPECT_LT(after, kTimesliceNs + kTimesliceNs / 5) << "the turn began when the stopped holder woke";
}

}  // namespace
}  // namespace gpuslice::testing
