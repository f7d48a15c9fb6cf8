// Replay in time: a FIFO queue, backfill, wait times and the pods that can never run, on a
// one-GPU node where the answers are worked out by hand.
#include <gtest/gtest.h>

#include <sstream>

#include "place/replay.h"
#include "place/report.h"
#include "place_test_files.h"

namespace gpuslice::place {
namespace {

using testing_files::TimedPod;

// a holds the only GPU from 0 to 10; b (GPU) arrives at 1 and runs 5; c (CPU only) arrives at 2
// and runs 2; d asks for two GPUs, more than the node has.
Experiment OneGpuNode() {
  return PrepareExperiment({{"n0", 8000, 65536, 1, "T4"}}, {TimedPod("a", 1, 0, 10), TimedPod("b", 1, 1, 6),
                                                            TimedPod("c", 0, 2, 4), TimedPod("d", 2, 2, 3)});
}

TEST(PlaceReplay, FifoMakesACpuPodWaitBehindAGpuPod) {
  const ReplayResult r = Replay(OneGpuNode(), "FGD", 1, ReplayOptions{});
  EXPECT_EQ(r.never_fit, 1);  // d
  EXPECT_EQ(r.never_started, 0);
  EXPECT_DOUBLE_EQ(r.mean_wait_s, (0 + 9 + 8) / 3.0);  // a 0; b and c start when a ends at 10
  EXPECT_DOUBLE_EQ(r.p95_wait_s, 9);
  EXPECT_DOUBLE_EQ(r.allocated_gpu_pct, 100);         // the GPU is busy from the first arrival to the last
  EXPECT_DOUBLE_EQ(r.idle_while_waiting_gpu_pct, 0);  // b waits, but no GPU is idle meanwhile
  EXPECT_DOUBLE_EQ(r.stranded_gpu_pct, 0);
}

TEST(PlaceReplay, BackfillStartsTheCpuPodAtOnce) {
  ReplayOptions options;
  options.backfill = true;
  const ReplayResult r = Replay(OneGpuNode(), "FGD", 1, options);
  EXPECT_DOUBLE_EQ(r.mean_wait_s, (0 + 9 + 0) / 3.0);
  EXPECT_EQ(r.never_started, 0);
}

TEST(PlaceReplay, DurationsScaleAndArrivalsCompress) {
  ReplayOptions options;
  options.duration_scale = 2;  // a holds the GPU until 20
  EXPECT_DOUBLE_EQ(Replay(OneGpuNode(), "FGD", 1, options).mean_wait_s, (0 + 19 + 18) / 3.0);
  options.duration_scale = 1;
  options.arrival_speedup = 2;  // arrivals at 0, 0.5 -> 0, 1 -> 1: a still ends at 10
  EXPECT_DOUBLE_EQ(Replay(OneGpuNode(), "FGD", 1, options).mean_wait_s, (0 + 10 + 9) / 3.0);
}

// The chart's series in 1-second steps: under FIFO b and c queue from their arrival to 10, so
// the table runs to the last queued step (9) plus a quarter; the step's queue length and the GPU
// held (a, then b) are as worked out above.
TEST(PlaceReplay, TheChartTableRunsPastTheLastQueuedStepWithTheSeriesMeans) {
  ReplayOptions options;
  options.series_bin_s = 1;
  const ReplayResult r = Replay(OneGpuNode(), "FGD", 1, options);
  EXPECT_EQ(ReplayPolicies({r}), std::vector<std::string>{"FGD"});
  std::istringstream in(ReplayTable({r}));
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header, "# hour FGD_allocated_pct FGD_stranded_pct FGD_queued");
  std::vector<std::string> rows;
  while (std::getline(in, line)) rows.push_back(line);
  ASSERT_EQ(rows.size(), 12u);                     // steps 0..11: the last with a pod queued is 9, and 9 + 9/4 + 1 = 12
  EXPECT_EQ(rows[0], "0.000 100.000 0.000 0.00");  // a holds the GPU, nothing queued yet
  EXPECT_EQ(rows[3], "0.001 100.000 0.000 2.00");  // b (from 1) and c (from 2) wait
  EXPECT_NE(ReplayGnuplot("t.dat", "t.svg", {"FGD"}, "x", 12).find("set xrange [0:12]"), std::string::npos);
}

}  // namespace
}  // namespace gpuslice::place
