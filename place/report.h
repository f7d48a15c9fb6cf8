// What a placement experiment writes, as text: every metric as CSV, a Markdown summary beside
// FGD's published numbers, and a gnuplot script for the chart of unallocated GPUs.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "place/experiment.h"
#include "place/replay.h"

namespace gpuslice::place {

// One row per policy, seed and whole percent of arrived demand.
std::string MetricsCsv(const std::vector<RunSeries>& runs);

struct PolicySummary {
  std::string policy;
  int seeds = 0;
  double unallocated_at_100 = 0;  // mean over seeds, % of GPUs
  double unallocated_at_130 = 0;
  double frag_at_100 = 0;
  double stranded_at_100 = 0;      // mean over seeds, % of GPUs (stranded.h)
  double failed_at_130 = 0;        // pods, mean over seeds
  double seconds = 0;              // mean run time
  double gangs_placed = 0;         // mean over seeds (gangs only)
  double nodes_per_gang = 0;       // mean nodes a placed gang spans (gangs only)
  double pair_bandwidth_pct = -1;  // multi-GPU pods' mean pair bandwidth, % of NVLink (-1: not measured)
  double on_one_island_pct = -1;   // multi-GPU pods an island could hold that got one (-1: not measured)
  double mixed_tier_gpus = -1;     // GPUs holding two tiers, the most at once, mean over seeds (-1: no tiers)
  double paid_pct = 0;             // paid share of arrivals (with tiers)
  // MIG (mig.h), means over seeds; mig_instances < 0: not measured.
  double isolated_pods = 0, isolated_failed = 0;
  double mig_instances = -1;
  double mig_used_pct_at_100 = 0;  // instances holding a pod, % of all
  double mig_fill_pct_at_100 = 0;  // milli-GPU the pods ask for, % of their instances' capacity
};
std::vector<PolicySummary> Summarise(const std::vector<RunSeries>& runs);

// The artifact's results on the default pod list (unallocated GPU % at 100% arrived, 10 seeds).
const std::map<std::string, double>& PublishedUnallocatedAt100();

std::string SummaryMarkdown(const std::vector<PolicySummary>& summary, const std::string& title,
                            bool compare_published);

// Replay (--replay): a table of means per policy over seeds, and the hourly series as CSV.
std::string ReplaySummary(const std::vector<ReplayResult>& results, const std::string& title);
std::string ReplayCsv(const std::vector<ReplayResult>& results);
// The policies of `results` in order of first appearance: the replay table's column order.
std::vector<std::string> ReplayPolicies(const std::vector<ReplayResult>& results);
// The replay's series for a chart: the step's start in hours, then per policy (ReplayPolicies'
// order) the mean over seeds of allocated GPU %, stranded GPU % and queued pods. Steps run to the
// last one in which any policy has a pod queued, plus a quarter, not beyond the series (all of it
// when nothing ever queued): after that the cluster only drains.
std::string ReplayTable(const std::vector<ReplayResult>& results);
// Three panels over time, one line per policy: allocated GPUs, stranded GPUs, queued pods; the
// first `hours` hours (0: all the table holds).
std::string ReplayGnuplot(const std::string& table_path, const std::string& svg_path,
                          const std::vector<std::string>& policies, const std::string& title, double hours = 0);

// The pool sweep (--pool-sweep): per pool size and policy, means over seeds; a table for gnuplot
// (pool %, then big-job wait and allocated % per policy) and the script that charts both.
struct PoolSweepPoint {
  double fraction = 0;
  std::vector<ReplayResult> results;  // every policy and seed at this size
};
std::string PoolSweepSummary(const std::vector<PoolSweepPoint>& sweep, int big_gpus, const std::string& title);
std::string PoolSweepTable(const std::vector<PoolSweepPoint>& sweep);
std::string PoolSweepGnuplot(const std::string& table_path, const std::string& svg_path,
                             const std::vector<std::string>& policies, int big_gpus, const std::string& title);

// A table of mean unallocated (or stranded) GPU % per arrived percent (columns: percent, then one
// per policy) and the gnuplot script that draws it to `svg_path` (and a zoom on 80-130%).
std::string UnallocatedTable(const std::vector<RunSeries>& runs);
std::string StrandedTable(const std::vector<RunSeries>& runs);
std::string GnuplotScript(const std::string& table_path, const std::string& svg_path,
                          const std::vector<std::string>& policies, const std::string& title,
                          const std::string& ylabel = "Unallocated GPUs (% of cluster GPUs)");

}  // namespace gpuslice::place
