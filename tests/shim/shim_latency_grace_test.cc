// A latency tenant's grace, as LatencyPriority::NoteGap learns it from the gaps before its
// priority launches (docs/scheduling.md, the latency class's contract, point 5): the gaps within
// its requests, which the grace must bridge, and not the gaps between them, which it must not.
// Fed the gap sequences of a few shapes of service; each expectation says what a sabotage of
// scripts/mutation-check.sh breaks (end to end: tests/scheduler/sched_latency_grace_test.cc). And
// the monitor's step that ends the priority as the grace runs out (shim/monitor_cadence.h).
#include "shim/latency_priority.h"
#include "shim/monitor_cadence.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace gpuslice::shim {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;

// `requests` requests, each `within` (the gaps between its launches) and then `between` before
// the next one.
uint64_t GraceAfter(const std::vector<uint64_t>& within, uint64_t between, int requests) {
  broker::ProcessGpuState published{};
  LatencyPriority priority(nullptr, &published);
  for (int r = 0; r < requests; ++r) {
    for (uint64_t gap : within) priority.NoteGap(gap);
    priority.NoteGap(between);
  }
  return priority.grace_ns();
}

TEST(ShimLatencyGraceTest, AServiceThatLaunchesARequestAtOnceHasTheMarginAlone) {
  // One gap per request, the period's: nothing within a request to bridge. The standard class's
  // least idle grace (200 us) would hold the co-runners off an idle device 150 us longer after
  // each request (`latency-grace-floor-of-standard-class`).
  EXPECT_EQ(GraceAfter({}, 20 * kMs, 50), kLatencyGraceMarginNs);
  EXPECT_EQ(GraceAfter({}, 1700 * kUs, 50), kLatencyGraceMarginNs);
}

TEST(ShimLatencyGraceTest, AChainsShortGapsAreLearntThoughTheMarginDidNotCoverTheFirst) {
  // 150 us between kernels, three times a request: the first comes after the 50 us grace ended.
  // Learnt only where covered (`latency-grace-learns-only-covered-gaps`), none would ever be.
  const uint64_t grace = GraceAfter({150 * kUs, 150 * kUs, 150 * kUs}, 20 * kMs, 1);
  EXPECT_GT(grace, 150 * kUs);
  EXPECT_GT(GraceAfter({150 * kUs, 150 * kUs, 150 * kUs}, 20 * kMs, 50), 150 * kUs);
}

TEST(ShimLatencyGraceTest, AChainsLongerGapsAreLearntOnceItsRequestsAreSeenFarApart) {
  // 350 us between kernels (a decode loop's sampling on the host), a request every 20 ms: a grace
  // for 350 us (1.45 ms) is well within the gaps between requests
  // (`latency-grace-learns-no-long-gap`).
  EXPECT_GT(GraceAfter({350 * kUs, 350 * kUs, 350 * kUs}, 20 * kMs, 10), 350 * kUs);
  EXPECT_GT(GraceAfter({350 * kUs}, 20 * kMs, 10), 350 * kUs);
}

TEST(ShimLatencyGraceTest, GapsAsLongAsThoseBetweenRequestsAreNotLearnt) {
  // A request every 1.2 ms, 0.4 ms of work: 0.8 ms gaps, all between requests. Learnt, the grace
  // would bridge them all and hold the co-runners off the idle two thirds of the device.
  EXPECT_LT(GraceAfter({}, 800 * kUs, 200), 800 * kUs);
  // A chain whose gaps are as long as a quarter of its period is not told apart from it either.
  EXPECT_LT(GraceAfter({600 * kUs}, 1500 * kUs, 200), 600 * kUs);
}

TEST(ShimLatencyGraceTest, AGraceLearntBetweenFarRequestsEndsWhenTheyComeClose) {
  // A chain of 350 us gaps a request every 20 ms, then a stream of kernels 0.8 ms apart. Each
  // gap of the stream, covered by the grace learnt from the chain, reads as one within a request;
  // only the count of the gaps between requests, which the stream brings down, caps the grace
  // below them (`latency-grace-bridges-requests`): else it would hold the co-runners off for good.
  broker::ProcessGpuState published{};
  LatencyPriority priority(nullptr, &published);
  for (int r = 0; r < 20; ++r) {
    for (int k = 0; k < 3; ++k) priority.NoteGap(350 * kUs);
    priority.NoteGap(20 * kMs);
  }
  ASSERT_GT(priority.grace_ns(), 350 * kUs);
  for (int k = 0; k < 300; ++k) priority.NoteGap(800 * kUs);
  EXPECT_LT(priority.grace_ns(), 800 * kUs);
}

// Sixteen kernels a request, 300 us apart, one request every 50 ms: the count of the gaps between
// requests, forgotten at each gap, still holds between two requests.
TEST(ShimLatencyGraceTest, ALongChainsGapsAreBridgedToItsLastKernel) {
  EXPECT_GT(GraceAfter(std::vector<uint64_t>(15, 300 * kUs), 50 * kMs, 20), 300 * kUs);
}

TEST(ShimLatencyGraceTest, ALateRequestsShortGapIsForgottenAtTheNextRequests) {
  // A request every 2.12 ms, the gap before it usually 1.7 ms; one request in ten ends late and
  // leaves 150 us, a gap as short as a host's turnaround. Each gap between requests ages what
  // such a gap taught (`grace-learns-gaps-between-requests`): the grace stays far below the
  // ordinary gap.
  broker::ProcessGpuState published{};
  LatencyPriority priority(nullptr, &published);
  for (int r = 0; r < 500; ++r) priority.NoteGap(r % 10 == 9 ? 150 * kUs : 1700 * kUs);
  EXPECT_LT(priority.grace_ns(), 500 * kUs);
}

TEST(ShimLatencyGraceTest, ACloseServicesLateGapsAreNotLearnt) {
  // A request every 2.12 ms that often waits: gaps before the next of 0.3 to 1.7 ms. A grace for
  // 300 us (1.25 ms) ends before the longest gaps, but would bridge many of the others.
  broker::ProcessGpuState published{};
  LatencyPriority priority(nullptr, &published);
  for (int r = 0; r < 500; ++r) priority.NoteGap((300 + (r * 7919) % 1400) * kUs);
  EXPECT_LT(priority.grace_ns(), 300 * kUs);
}

// The priority ends as the grace runs out: the monitor's step after a request's work ends is cut
// short to the grace's end, not left at its 200 us while the co-runners wait on an idle device
// (`priority-ends-at-monitor-step`), and never a spin.
TEST(ShimLatencyGraceTest, TheMonitorLooksAgainAsTheGraceRunsOut) {
  EXPECT_LE(MonitorSleepNs(false, true, true, false, 30 * kUs), 31 * kUs);
  EXPECT_LE(MonitorSleepNs(true, true, true, false, 30 * kUs), 31 * kUs);
  EXPECT_GE(MonitorSleepNs(false, true, true, false, 0), 10 * kUs);
  EXPECT_EQ(MonitorSleepNs(false, true, true, true, UINT64_MAX), 200 * kUs);  // work in flight
  EXPECT_EQ(MonitorSleepNs(false, false, false, false, UINT64_MAX), 5 * kMs);
}

// The grace's end as the monitor reads it: from the process's work's end, only while the
// priority is held and nothing is in flight.
TEST(ShimLatencyGraceTest, TheGraceRunsFromTheWorksEnd) {
  broker::ProcessGpuState published{};
  LatencyPriority priority(nullptr, &published);
  published.idle_since_ns.store(1 * kMs);
  EXPECT_EQ(priority.UntilGraceEndsNs(1 * kMs + 10 * kUs), UINT64_MAX);  // no priority held
  published.priority_until_ns.store(30 * kMs);
  EXPECT_EQ(priority.UntilGraceEndsNs(1 * kMs + 10 * kUs), kLatencyGraceMarginNs - 10 * kUs);
  EXPECT_EQ(priority.UntilGraceEndsNs(2 * kMs), 0u);
  published.inflight.store(1);
  EXPECT_EQ(priority.UntilGraceEndsNs(2 * kMs), UINT64_MAX);  // its completion starts the grace
}

}  // namespace
}  // namespace gpuslice::shim
