// Replay in time (--replay): pods arrive at the trace's creation_time and hold their resources
// for deletion_time - creation_time once started; a FIFO queue holds those that do not fit,
// optionally with backfill (later pods that fit start while the head waits). FGD's experiment
// has no time and never deletes; this is what it leaves out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "place/experiment.h"
#include "place/pool.h"

namespace gpuslice::place {

struct ReplayOptions {
  bool backfill = false;
  int backfill_depth = 100;  // queued pods looked at behind a head that does not fit
  // Arrival times are divided by this (durations are kept): the trace spans ~150 days with few
  // pods at a time, so a compressed replay is what loads the cluster.
  double arrival_speedup = 1.0;
  double duration_scale = 1.0;  // run times are multiplied by this
  OurPolicyTuning tuning;
  // A reserved whole-node pool (pool.h): big pods (pool.min_gpus GPUs or more) go there first;
  // others only when no other node fits, as backfill a big pod that fits nowhere else reclaims.
  // pool.min_gpus also says which pods the big-job wait is reported for, with or without a pool.
  PoolOptions pool;
  bool tiers_apart = false;  // tiers.h; the pods' tiers as RunOptions gives them
  double random_paid_fraction = -1;
  uint64_t tier_seed = 7;
  int64_t series_bin_s = 3600;  // the time series' step (hourly_*: one value per bin)
  MigOptions mig;               // MIG-partitioned nodes (mig.h)
  MigLayout mig_layout;
};

struct ReplayResult {
  std::string policy;
  uint64_t seed = 0;
  int pods = 0;
  int never_fit = 0;                       // larger than any node even when empty: dropped on arrival
  int never_started = 0;                   // still queued when the trace ends
  double mean_wait_s = 0, p95_wait_s = 0;  // over started pods (to their last start)
  double big_mean_wait_s = 0;              // pods of pool.min_gpus GPUs or more
  int big_started = 0;
  int pool_gpus = 0;                      // GPUs in the reserved pool
  int evictions = 0;                      // backfilled pods a big pod reclaimed their node from
  double evicted_gpu_hours = 0;           // GPU time those pods lose (they start again)
  double allocated_gpu_pct = 0;           // time-weighted, first to last arrival
  double idle_while_waiting_gpu_pct = 0;  // idle GPUs while a GPU pod waits, same window, % of all
  double stranded_gpu_pct = 0;            // idle GPUs no queued pod can use (stranded.h), same window, % of all
  // The time series: from the first arrival to a day after the last one, or after the queue last
  // empties if later (then only the drain is left), in steps of series_bin_s.
  int64_t series_bin_s = 3600;               // the series' step, seconds (an hour unless asked)
  std::vector<double> hourly_allocated_pct;  // per step of trace time
  std::vector<double> hourly_stranded_pct;
  std::vector<double> hourly_queued;  // mean queued pods per hour
};

// `experiment` must come from a pod list with creation_time and deletion_time.
ReplayResult Replay(const Experiment& experiment, const std::string& policy, uint64_t seed,
                    const ReplayOptions& options);

}  // namespace gpuslice::place
