// Kernels of different processes compete for one simulated device the way the hardware
// time-slices contexts: one at a time, in turns of one timeslice, with no notion of weights.
#include <cuda.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <vector>

#include "common/clock.h"
#include "gpuslice/sim_query.h"
#include "tests/support/sim_driver_helpers.h"
#include "tests/support/test_env.h"

namespace gpuslice::testing {
namespace {

using SimContentionTest = SimTest;

// A child that keeps `depth` kernels of `kernel_ns` in flight until `run_ns` has passed.
int ComputeBoundChild(int fd, uint64_t kernel_ns, int depth, uint64_t run_ns) {
  CUcontext ctx;
  CUmodule module;
  CUfunction spin;
  if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
  if (cuModuleLoadData(&module, kTestPtx) || cuModuleGetFunction(&spin, module, "spin_ns")) return 2;
  Signal(fd);
  std::vector<CUevent> inflight;
  const uint64_t end = MonotonicNanos() + run_ns;
  while (MonotonicNanos() < end) {
    CUevent e;
    cuEventCreate(&e, 0);
    if (LaunchSpin(spin, kernel_ns) != CUDA_SUCCESS) return 3;
    cuEventRecord(e, nullptr);
    inflight.push_back(e);
    if (static_cast<int>(inflight.size()) >= depth) {
      cuEventSynchronize(inflight.front());
      cuEventDestroy(inflight.front());
      inflight.erase(inflight.begin());
    }
  }
  cuCtxSynchronize();
  return 0;
}

struct Share {
  uint64_t busy_ns;
  uint64_t kernels;
};

std::vector<Share> SharesOf(const std::string& path, const std::vector<pid_t>& pids) {
  simquery::Snapshot snap;
  std::string error;
  EXPECT_TRUE(simquery::TakeSnapshot(path, &snap, &error)) << error;
  std::vector<Share> shares;
  for (pid_t pid : pids) {
    Share s{0, 0};
    for (const auto& p : snap.devices[0].processes) {
      if (p.pid == pid) s = {p.busy_ns, p.kernels};
    }
    shares.push_back(s);
  }
  return shares;
}

TEST_F(SimContentionTest, TwoComputeBoundProcessesGetEqualTurns) {
  const uint64_t run_ns = 2'000'000'000;
  std::vector<std::unique_ptr<ForkedChild>> children;
  std::vector<pid_t> pids;
  for (int i = 0; i < 2; ++i) {
    children.push_back(
        std::make_unique<ForkedChild>([&](int fd) { return ComputeBoundChild(fd, 1'000'000, 2, run_ns); }));
    pids.push_back(children.back()->pid());
  }
  for (auto& c : children) ASSERT_TRUE(c->WaitSignal());
  const uint64_t start = MonotonicNanos();
  for (auto& c : children) ASSERT_EQ(c->Wait(), 0);
  const uint64_t wall = MonotonicNanos() - start;
  const auto shares = SharesOf(state_path(), pids);
  const double total = static_cast<double>(shares[0].busy_ns + shares[1].busy_ns);
  // One device: the processes' busy times never overlap, so together they fit in the wall time.
  EXPECT_LE(total, static_cast<double>(wall) * 1.05);
  EXPECT_GE(total, static_cast<double>(run_ns) * 0.7) << "the device should be kept busy";
  for (const auto& s : shares) {
    EXPECT_GT(s.busy_ns / total, 0.35);
    EXPECT_LT(s.busy_ns / total, 0.65);
  }
}

TEST_F(SimContentionTest, LongKernelsDoNotStarveShortOnesBeyondTheTimeslice) {
  // Hardware time-slicing: a process with 50 ms kernels and one with 1 ms kernels both get
  // turns of one timeslice, so neither takes the device for a whole long kernel.
  const uint64_t run_ns = 2'000'000'000;
  ForkedChild heavy([&](int fd) { return ComputeBoundChild(fd, 50'000'000, 2, run_ns); });
  ForkedChild light([&](int fd) { return ComputeBoundChild(fd, 1'000'000, 2, run_ns); });
  ASSERT_TRUE(heavy.WaitSignal());
  ASSERT_TRUE(light.WaitSignal());
  ASSERT_EQ(heavy.Wait(), 0);
  ASSERT_EQ(light.Wait(), 0);
  const auto shares = SharesOf(state_path(), {heavy.pid(), light.pid()});
  const double total = static_cast<double>(shares[0].busy_ns + shares[1].busy_ns);
  EXPECT_GT(shares[1].busy_ns / total, 0.3) << "the short-kernel process must get its turns";
  EXPECT_GT(shares[1].kernels, 300u);
}

TEST_F(SimContentionTest, KilledOwnerDoesNotBlockTheDevice) {
  ForkedChild hog([](int fd) {
    CUcontext ctx;
    CUmodule module;
    CUfunction spin;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx)) return 1;
    if (cuModuleLoadData(&module, kTestPtx) || cuModuleGetFunction(&spin, module, "spin_ns")) return 2;
    LaunchSpin(spin, 60'000'000'000ULL);  // a minute-long kernel
    sleep(1);
    Signal(fd);
    pause();
    return 0;
  });
  ASSERT_TRUE(hog.WaitSignal());
  CUfunction spin = InitAndLoadSpin();
  hog.Kill(SIGKILL);
  hog.Wait();
  const uint64_t start = MonotonicNanos();
  ASSERT_CU(LaunchSpin(spin, 10'000'000));
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_LT(MonotonicNanos() - start, 1'000'000'000ULL);
}

}  // namespace
}  // namespace gpuslice::testing
