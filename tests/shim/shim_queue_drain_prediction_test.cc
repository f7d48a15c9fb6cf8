// The queued-work budget counted in time beside a latency tenant (shim/queue_drain_prediction.h):
// a one-process co-runner of 3 ms kernels, whose share of the 1 ms is all of it, may queue its
// next kernel only once the running one has at most 1 ms left — so that a request arriving at
// any moment waits for at most 1 ms and one kernel — and not before. The control is the budget in
// kernels alone (prediction not counted), which lets the second kernel in at once.
//
// The prediction is the GPU's: three co-runner processes, each allowed one kernel in flight,
// together keep one kernel running and at most 1 ms more; the control gives each its own
// prediction, and a request then waits behind a kernel of each.
#include "shim/queue_drain_prediction.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>

namespace gpuslice::shim {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kKernel = 3 * kMs;

// The most work queued ahead of a request arriving at any millisecond of a 30 ms run, when the
// launcher launches whenever the prediction lets it (at most two kernels in flight, as the
// budget in kernels allows), kernels completing exactly as predicted.
uint64_t WorstWorkAheadNs(QueueDrainPrediction* p) {
  uint64_t worst = 0;
  uint64_t ends[2] = {0, 0};  // the predicted ends of the kernels in flight, 0: none
  for (uint64_t now = 0; now < 30 * kMs; now += kMs / 10) {
    for (uint64_t& end : ends) {
      if (end != 0 && end <= now) end = 0;
    }
    if (ends[0] == 0 && ends[1] == 0) p->Drained(now);
    for (uint64_t& end : ends) {
      if (end == 0 && !p->TooFar(now)) {
        const uint64_t other = ends[0] + ends[1];  // the other slot's end, or 0
        end = std::max(other, now) + kKernel;
        EXPECT_TRUE(p->Claim(now, kKernel));
      }
    }
    const uint64_t last = std::max(ends[0], ends[1]);
    worst = std::max(worst, last > now ? last - now : 0);
  }
  return worst;
}

TEST(ShimQueueDrainPredictionTest, ASecondLongKernelWaitsUntilTheRunningOneHasTheShareLeft) {
  QueueDrainPrediction p;
  p.SetAhead(kMs);
  EXPECT_FALSE(p.TooFar(0));
  EXPECT_TRUE(p.Claim(0, kKernel));
  EXPECT_TRUE(p.TooFar(0)) << "3 ms queued, 1 ms allowed";
  EXPECT_TRUE(p.TooFar(1 * kMs + 1));
  EXPECT_FALSE(p.TooFar(2 * kMs)) << "1 ms left";
  EXPECT_EQ(p.WithinAt(0), 2 * kMs);
  EXPECT_EQ(p.WithinAt(5 * kMs), 5 * kMs) << "never before now";
  EXPECT_FALSE(p.Claim(1 * kMs, kKernel)) << "too far ahead: nothing claimed";
  EXPECT_EQ(p.WithinAt(1 * kMs), 2 * kMs);
  EXPECT_TRUE(p.Claim(2 * kMs, kKernel));
  EXPECT_EQ(p.WithinAt(2 * kMs), 5 * kMs) << "the second ends after the first";
  p.Drained(3 * kMs);  // both completed early: the prediction is cut back
  EXPECT_FALSE(p.TooFar(3 * kMs));
}

TEST(ShimQueueDrainPredictionTest, ARequestWaitsForAtMostOneKernelAndTheShare) {
  QueueDrainPrediction p;
  p.SetAhead(kMs);
  EXPECT_LE(WorstWorkAheadNs(&p), kKernel + kMs);
}

TEST(ShimQueueDrainPredictionTest, ControlCountedInKernelsOnlyARequestWaitsForTwoKernels) {
  QueueDrainPrediction p;  // not counted in time: the budget in kernels alone
  EXPECT_GT(WorstWorkAheadNs(&p), kKernel + kMs);
}

TEST(ShimQueueDrainPredictionTest, AClaimTurnedAwayIsGivenBackUnlessAnotherCameBehindIt) {
  std::atomic<uint64_t> gpu{0};
  QueueDrainPrediction a, b;
  a.Bind(&gpu);
  b.Bind(&gpu);
  a.SetAhead(kMs);
  b.SetAhead(kMs);
  ASSERT_TRUE(a.Claim(0, kKernel));
  a.Unclaim();  // the grant closed before it went in
  EXPECT_EQ(gpu.load(), 0u);
  ASSERT_TRUE(a.Claim(0, kKernel));
  ASSERT_TRUE(b.Claim(2 * kMs, kKernel));
  a.Unclaim();  // b's place lies behind a's: kept
  EXPECT_EQ(gpu.load(), 6 * kMs);
  a.Drained(1 * kMs);  // not a's claim that is last: b's work is still predicted
  EXPECT_EQ(gpu.load(), 6 * kMs);
  b.Drained(4 * kMs);  // b's own, the last: cut back
  EXPECT_EQ(gpu.load(), 4 * kMs);
}

// Three processes of one kernel in flight each (the budget in kernels beside a latency tenant with
// several processes), launching whenever their prediction lets them, kernels running one after
// another as the device runs them (time-sliced, they end no sooner in all). The most work queued
// ahead of a request arriving at any moment.
uint64_t WorstWorkAheadOfThreeNs(QueueDrainPrediction (&processes)[3]) {
  uint64_t worst = 0;
  uint64_t ends[3] = {0, 0, 0};
  uint64_t device_free = 0;  // when the work in flight, all of it, is done
  for (uint64_t now = 0; now < 60 * kMs; now += kMs / 10) {
    for (int i = 0; i < 3; ++i) {
      if (ends[i] != 0 && ends[i] <= now) {
        ends[i] = 0;
        processes[i].Drained(now);
      }
      if (ends[i] == 0 && processes[i].Claim(now, kKernel)) {
        device_free = std::max(device_free, now) + kKernel;
        ends[i] = device_free;
      }
    }
    worst = std::max(worst, device_free > now ? device_free - now : 0);
  }
  return worst;
}

TEST(ShimQueueDrainPredictionTest, SeveralProcessesTogetherQueueOneKernelAndTheShare) {
  std::atomic<uint64_t> gpu{0};
  QueueDrainPrediction processes[3];
  for (QueueDrainPrediction& p : processes) {
    p.Bind(&gpu);
    p.SetAhead(kMs);
  }
  EXPECT_LE(WorstWorkAheadOfThreeNs(processes), kKernel + kMs);
}

TEST(ShimQueueDrainPredictionTest, ControlEachProcessItsOwnPredictionQueuesAKernelEach) {
  QueueDrainPrediction processes[3];
  for (QueueDrainPrediction& p : processes) p.SetAhead(kMs);
  EXPECT_GE(WorstWorkAheadOfThreeNs(processes), 3 * kKernel - kMs);
}

}  // namespace
}  // namespace gpuslice::shim
