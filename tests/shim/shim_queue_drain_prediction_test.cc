// The queued-work budget counted in time beside a latency tenant (shim/queue_drain_prediction.h):
// a one-process co-runner of 3 ms kernels, whose share of the 1 ms is all of it, may queue its
// next kernel only once the running one has at most 1 ms left — so that a request arriving at
// any moment waits for at most 1 ms and one kernel — and not before. The control is the budget in
// kernels alone (prediction not counted), which lets the second kernel in at once.
#include "shim/queue_drain_prediction.h"

#include <gtest/gtest.h>

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
        p->Launched(now, kKernel);
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
  p.Launched(0, kKernel);
  EXPECT_TRUE(p.TooFar(0)) << "3 ms queued, 1 ms allowed";
  EXPECT_TRUE(p.TooFar(1 * kMs + 1));
  EXPECT_FALSE(p.TooFar(2 * kMs)) << "1 ms left";
  EXPECT_EQ(p.WithinAt(0), 2 * kMs);
  EXPECT_EQ(p.WithinAt(5 * kMs), 5 * kMs) << "never before now";
  p.Launched(2 * kMs, kKernel);
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

}  // namespace
}  // namespace gpuslice::shim
