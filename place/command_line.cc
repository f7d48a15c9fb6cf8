#include "place/command_line.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "place/pool.h"
#include "place/trace.h"

namespace gpuslice::place {
namespace {

// An option whose default --help shows and whose value must lie in [lo, hi].
template <typename T, typename Bound>
CLI::Option* AddRanged(CLI::App& app, const std::string& name, T& value, const std::string& doc, Bound lo, Bound hi) {
  return app.add_option(name, value, doc)->capture_default_str()->check(CLI::Range(lo, hi));
}

void AddExperimentOptions(CLI::App& app, PlaceCommand* c) {
  app.add_option("--nodes", c->nodes_path, "Node list CSV (sn,cpu_milli,memory_mib,gpu,model)");
  app.add_option("--random-cluster", c->random_cluster_text,
                 "Instead of --nodes: a cluster drawn at random, 'seed=N[,family=F][,nodes=N][,gpus=8|16]"
                 "[,models=G2|T4][,cpu-nodes=SHARE][,cores-per-gpu=C][,memory-per-gpu=GIB]' (families: mixed, "
                 "homogeneous, cpu-nodes, big-nodes, small-nodes; what is not given is drawn from the seed)");
  app.add_option("--write-nodes", c->write_nodes_path, "Write the node list the run uses to this CSV file");
  app.add_option("--pods", c->pods_path,
                 "Pod list CSV: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,"
                 "deletion_time,scheduled_time]")
      ->required();
  app.add_option("--policies", c->policies_text, "Comma-separated policies to run")->capture_default_str();
  AddRanged(app, "--seeds", c->seeds, "Number of seeds (runs per policy)", 1, 10000);
  app.add_option("--first-seed", c->first_seed, "First seed; the others follow it (the artifact used 42..51)")
      ->capture_default_str();
  AddRanged(app, "--inflation", c->inflation, "Arrived GPU demand to reach, as a multiple of the cluster's GPUs", 0.01,
            10.0);
  AddRanged(app, "--jobs", c->jobs, "Runs in parallel (threads)", 1, 1024);
  app.add_option("--out", c->out_dir,
                 "Directory for metrics.csv, summary.md, unallocated.dat, stranded.dat, their gnuplot scripts (.gp) "
                 "and the charts unallocated.svg, unallocated-zoom.svg, stranded.svg, stranded-zoom.svg (with "
                 "--replay: replay.csv, replay-summary.md, replay.dat, replay.gp and the chart replay.svg: allocated "
                 "and stranded GPUs and queued pods per --replay-step)");
  app.add_option("--title", c->title, "Title of the summary and chart (default: the pod list's file name)");
  AddRanged(app, "--fgd-bf-weight", c->tuning.best_fit_weight,
            "FGD-BF: milli-GPU of fragmentation worth a whole node's best-fit residual (0: the exact gradient "
            "alone)",
            0.0, 1e6);
  app.add_flag("--fgd-bf-no-memory", c->no_memory, "FGD-BF: leave memory out of the target classes' fit, as FGD does");
  app.add_flag("--gangs", c->gangs,
               "Gangs: every k-GPU pod (k > 1) becomes k one-GPU pods with 1/k of its CPU and memory, placed all or "
               "nothing on any nodes (FGD keeps a multi-GPU pod on one node)");
  AddRanged(app, "--nvlink-island", c->nvlink_island,
            "NVLink islands of this many consecutive GPUs per node: report the share of multi-GPU pods (of at most "
            "that many GPUs) whose GPUs share one island, and every multi-GPU pod's mean pair bandwidth as a % "
            "of NVLink's (0: off)",
            0, kMaxGpusPerNode);
  AddRanged(app, "--nvlink-gbps", c->nvlink_gbps,
            "With --nvlink-island: a GPU's NVLink bandwidth, GB/s; with --pcie-gbps it weighs the pairs of a "
            "multi-GPU pod's GPUs that cross islands in the pair-bandwidth column (default: V100, NVLink 2)",
            0.001, 1e6);
  AddRanged(app, "--pcie-gbps", c->pcie_gbps,
            "With --nvlink-island: the PCIe bandwidth between GPUs, GB/s (default: PCIe 3.0 x16)", 0.001, 1e6);
  app.add_flag("--nvlink-prefer", c->nvlink_prefer,
               "With --nvlink-island: a multi-GPU pod takes its GPUs from one island of the chosen node where it can");
}

void AddReplayOptions(CLI::App& app, PlaceCommand* c) {
  app.add_flag("--replay", c->replay,
               "Replay in time instead: pods arrive at creation_time, run for deletion_time - creation_time, wait in a "
               "FIFO queue when nothing fits (needs the 11-column pod lists)");
  app.add_flag("--backfill", c->replay_options.backfill,
               "With --replay: while the queue's head waits, start later pods that fit");
  AddRanged(app, "--replay-speedup", c->replay_options.arrival_speedup,
            "With --replay: divide arrival times by this, keeping run times (the trace spans ~150 days)", 1.0, 1e9);
  AddRanged(app, "--replay-duration-scale", c->replay_options.duration_scale,
            "With --replay: multiply run times by this (the trace alone keeps 0.23% of the GPUs busy)", 0.0, 1e9);
  AddRanged(app, "--replay-step", c->replay_options.series_bin_s,
            "With --replay: seconds per step of the time series in replay.csv and the chart replay.svg", int64_t{1},
            int64_t{86400 * 365});
  AddRanged(app, "--replay-chart-hours", c->replay_chart_hours,
            "With --replay: chart only the first this many hours in replay.svg (0: up to a quarter past the last "
            "hour with a pod queued)",
            0.0, 1e7);
  AddRanged(app, "--backfill-depth", c->replay_options.backfill_depth, "With --backfill: queued pods looked at", 1,
            1000000);
}

void AddTierMigPoolOptions(CLI::App& app, PlaceCommand* c) {
  app.add_option("--tiers", c->tiers,
                 "Pods carry a tier, free or paid: none; qos (the trace's qos column: LS and Guaranteed paid, BE and "
                 "Burstable free); random (paid with --tier-paid-fraction). Reports GPUs holding two tiers")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "qos", "random"}));
  AddRanged(app, "--tier-paid-fraction", c->tier_paid_fraction, "With --tiers random: the share of pods that are paid",
            0.0, 1.0);
  app.add_option("--tier-seed", c->tier_seed, "With --tiers random: the seed of the draw")->capture_default_str();
  app.add_flag("--tiers-apart", c->tiers_apart, "With --tiers: pods of two tiers never share a physical GPU");
  AddRanged(app, "--mig-fraction", c->mig.fraction,
            "MIG: partition the GPUs of whole nodes holding this share of the cluster's GPUs into MIG instances "
            "(--mig-layout on every GPU); only isolated pods (--mig-isolate) use them",
            0.0, 1.0);
  app.add_option("--mig-nodes", c->mig_nodes_text,
                 "MIG: the partitioned nodes as comma-separated names (instead of --mig-fraction)");
  app.add_option("--mig-model", c->mig.model,
                 "MIG: whose profiles --mig-layout names (A100-40GB, A100-80GB, H100-80GB, H200)")
      ->capture_default_str();
  app.add_option("--mig-layout", c->mig.layout,
                 "MIG: the instances of every partitioned GPU, comma-separated profiles of --mig-model (e.g. "
                 "4g.40gb,3g.40gb); an instance covers a share of min(compute/7, memory/8) of a GPU")
      ->capture_default_str();
  app.add_flag("--mig-isolate", c->mig.isolate_paid,
               "MIG: with --tiers, the paid tier's shares require isolation: each fits only a free MIG instance that "
               "covers it, and takes all of it");
  app.add_flag("--mig-open", c->mig.open,
               "MIG: shares that do not require isolation may take a free MIG instance that covers them too, a whole "
               "one each (without it they use only non-MIG GPUs)");
  AddRanged(app, "--pool-fraction", c->replay_options.pool.fraction,
            "With --replay: reserve whole nodes holding this share of the GPUs for pods of --pool-min-gpus or more; "
            "smaller pods go there only as backfill such a pod may reclaim (evicted, queued again)",
            0.0, 1.0);
  app.add_option("--pool-nodes", c->pool_nodes_text,
                 "With --replay: the reserved pool as comma-separated node names (instead of --pool-fraction)");
  AddRanged(app, "--pool-min-gpus", c->replay_options.pool.min_gpus,
            "With --replay: pods of at least this many GPUs are big: the pool's, and the big-job wait's", 1,
            kMaxGpusPerNode);
  app.add_option(
      "--pool-sweep", c->pool_sweep_text,
      "With --replay: replay once per pool fraction in this comma-separated list (0 first: no pool) and write "
      "pool-sweep.dat, pool-sweep.gp and the chart pool-sweep.svg to --out");
}

}  // namespace

std::string AllPolicies() { return fmt::format("{}", fmt::join(PolicyNames(), ",")); }

void AddOptions(CLI::App& app, PlaceCommand* c) {
  c->policies_text = AllPolicies();
  AddExperimentOptions(app, c);
  AddReplayOptions(app, c);
  AddTierMigPoolOptions(app, c);
  app.add_flag("--no-chart", c->no_chart, "Do not run gnuplot (the .dat and .gp files are still written)");
  app.add_flag("--quiet", c->quiet, "No progress line on stderr");
}

}  // namespace gpuslice::place
