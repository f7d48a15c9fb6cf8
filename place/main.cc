// gpuslice-place: FGD's placement experiment on the Alibaba GPU trace, every policy x seed.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "place/experiment.h"
#include "place/policy.h"
#include "place/replay.h"
#include "place/tiers.h"
#include "place/mig.h"
#include "place/pool.h"
#include "place/report.h"
#include "place/trace.h"

using namespace gpuslice::place;

namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

bool WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) {
    std::cerr << "gpuslice-place: cannot write " << path.string() << "\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string all_policies;
  for (const std::string& p : PolicyNames()) all_policies += (all_policies.empty() ? "" : ",") + p;
  CLI::App app(
      "gpuslice-place: trace-driven GPU placement simulator. Reproduces FGD's experiment (USENIX ATC'23): the "
      "trace's pods, shuffled by a seed and sampled with replacement until the GPUs they ask for reach --inflation "
      "times the cluster's, are placed one by one, never deleted; after each pod it records allocated GPUs, "
      "fragmentation and failed pods, and reports them per 1% of arrived GPU demand, averaged over seeds.");
  std::string nodes_path, pods_path, policies_text = all_policies, out_dir, title;
  int seeds = 10, jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  uint64_t first_seed = 42;
  double inflation = 1.3;
  bool quiet = false, no_chart = false, no_memory = false, gangs = false, nvlink_prefer = false, replay = false;
  ReplayOptions replay_options;
  int nvlink_island = 0;
  double nvlink_gbps = 300, pcie_gbps = 32;
  OurPolicyTuning options_tuning;
  app.add_option("--nodes", nodes_path, "Node list CSV (sn,cpu_milli,memory_mib,gpu,model)")->required();
  app.add_option("--pods", pods_path,
                 "Pod list CSV: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,"
                 "deletion_time,scheduled_time]")
      ->required();
  app.add_option("--policies", policies_text, "Comma-separated policies to run")->capture_default_str();
  app.add_option("--seeds", seeds, "Number of seeds (runs per policy)")->capture_default_str()->check(CLI::Range(1, 10000));
  app.add_option("--first-seed", first_seed, "First seed; the others follow it (the artifact used 42..51)")
      ->capture_default_str();
  app.add_option("--inflation", inflation, "Arrived GPU demand to reach, as a multiple of the cluster's GPUs")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 10.0));
  app.add_option("--jobs", jobs, "Runs in parallel (threads)")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--out", out_dir,
                 "Directory for metrics.csv, summary.md, unallocated.dat, stranded.dat, their gnuplot scripts (.gp) and the charts unallocated.svg, unallocated-zoom.svg, stranded.svg, stranded-zoom.svg (with --replay: replay.csv, replay-summary.md, replay.dat, replay.gp and the chart replay.svg: allocated and stranded GPUs and queued pods per --replay-step)");
  app.add_option("--title", title, "Title of the summary and chart (default: the pod list's file name)");
  app.add_option("--fgd-bf-weight", options_tuning.best_fit_weight,
                 "FGD-BF: milli-GPU of fragmentation worth a whole node's best-fit residual (0: the exact gradient "
                 "alone)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app.add_flag("--fgd-bf-no-memory", no_memory, "FGD-BF: leave memory out of the target classes' fit, as FGD does");
  app.add_flag("--gangs", gangs,
               "Gangs: every k-GPU pod (k > 1) becomes k one-GPU pods with 1/k of its CPU and memory, placed all or "
               "nothing on any nodes (FGD keeps a multi-GPU pod on one node)");
  app.add_option("--nvlink-island", nvlink_island,
                 "NVLink islands of this many consecutive GPUs per node: report the share of multi-GPU pods (of at most "
                 "that many GPUs) whose GPUs share one island, and every multi-GPU pod's mean pair bandwidth as a % "
                 "of NVLink's (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxGpusPerNode));
  app.add_option("--nvlink-gbps", nvlink_gbps,
                 "With --nvlink-island: a GPU's NVLink bandwidth, GB/s; with --pcie-gbps it weighs the pairs of a "
                 "multi-GPU pod's GPUs that cross islands in the pair-bandwidth column (default: V100, NVLink 2)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  app.add_option("--pcie-gbps", pcie_gbps, "With --nvlink-island: the PCIe bandwidth between GPUs, GB/s (default: PCIe 3.0 x16)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  app.add_flag("--nvlink-prefer", nvlink_prefer,
               "With --nvlink-island: a multi-GPU pod takes its GPUs from one island of the chosen node where it can");
  app.add_flag("--replay", replay,
               "Replay in time instead: pods arrive at creation_time, run for deletion_time - creation_time, wait in a "
               "FIFO queue when nothing fits (needs the 11-column pod lists)");
  app.add_flag("--backfill", replay_options.backfill,
               "With --replay: while the queue's head waits, start later pods that fit");
  app.add_option("--replay-speedup", replay_options.arrival_speedup,
                 "With --replay: divide arrival times by this, keeping run times (the trace spans ~150 days)")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e9));
  app.add_option("--replay-duration-scale", replay_options.duration_scale,
                 "With --replay: multiply run times by this (the trace alone keeps 0.23% of the GPUs busy)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--replay-step", replay_options.series_bin_s,
                 "With --replay: seconds per step of the time series in replay.csv and the chart replay.svg")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{86400 * 365}));
  double replay_chart_hours = 0;
  app.add_option("--replay-chart-hours", replay_chart_hours,
                 "With --replay: chart only the first this many hours in replay.svg (0: up to a quarter past the last "
                 "hour with a pod queued)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e7));
  app.add_option("--backfill-depth", replay_options.backfill_depth, "With --backfill: queued pods looked at")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  std::string tiers = "none";
  double tier_paid_fraction = 0.5;
  uint64_t tier_seed = 7;
  bool tiers_apart = false;
  app.add_option("--tiers", tiers,
                 "Pods carry a tier, free or paid: none; qos (the trace's qos column: LS and Guaranteed paid, BE and "
                 "Burstable free); random (paid with --tier-paid-fraction). Reports GPUs holding two tiers")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "qos", "random"}));
  app.add_option("--tier-paid-fraction", tier_paid_fraction, "With --tiers random: the share of pods that are paid")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--tier-seed", tier_seed, "With --tiers random: the seed of the draw")->capture_default_str();
  app.add_flag("--tiers-apart", tiers_apart, "With --tiers: pods of two tiers never share a physical GPU");
  MigOptions mig;
  std::string mig_nodes_text;
  app.add_option("--mig-fraction", mig.fraction,
                 "MIG: partition the GPUs of whole nodes holding this share of the cluster's GPUs into MIG instances "
                 "(--mig-layout on every GPU); only isolated pods (--mig-isolate) use them")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--mig-nodes", mig_nodes_text, "MIG: the partitioned nodes as comma-separated names (instead of --mig-fraction)");
  app.add_option("--mig-model", mig.model, "MIG: whose profiles --mig-layout names (A100-40GB, A100-80GB, H100-80GB, H200)")
      ->capture_default_str();
  app.add_option("--mig-layout", mig.layout,
                 "MIG: the instances of every partitioned GPU, comma-separated profiles of --mig-model (e.g. "
                 "4g.40gb,3g.40gb); an instance covers a share of min(compute/7, memory/8) of a GPU")
      ->capture_default_str();
  app.add_flag("--mig-isolate", mig.isolate_paid,
               "MIG: with --tiers, the paid tier's shares require isolation: each fits only a free MIG instance that "
               "covers it, and takes all of it");
  app.add_flag("--mig-open", mig.open,
               "MIG: shares that do not require isolation may take a free MIG instance that covers them too, a whole "
               "one each (without it they use only non-MIG GPUs)");
  std::string pool_nodes_text, pool_sweep_text;
  app.add_option("--pool-fraction", replay_options.pool.fraction,
                 "With --replay: reserve whole nodes holding this share of the GPUs for pods of --pool-min-gpus or more; "
                 "smaller pods go there only as backfill such a pod may reclaim (evicted, queued again)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--pool-nodes", pool_nodes_text, "With --replay: the reserved pool as comma-separated node names (instead of --pool-fraction)");
  app.add_option("--pool-min-gpus", replay_options.pool.min_gpus,
                 "With --replay: pods of at least this many GPUs are big: the pool's, and the big-job wait's")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxGpusPerNode));
  app.add_option("--pool-sweep", pool_sweep_text,
                 "With --replay: replay once per pool fraction in this comma-separated list (0 first: no pool) and write "
                 "pool-sweep.dat, pool-sweep.gp and the chart pool-sweep.svg to --out");
  app.add_flag("--no-chart", no_chart, "Do not run gnuplot (the .dat and .gp files are still written)");
  app.add_flag("--quiet", quiet, "No progress line on stderr");
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::string> policies = SplitList(policies_text);
  if (policies.empty()) {
    std::cerr << "gpuslice-place: --policies is empty; valid: " << all_policies << "\n";
    return 2;
  }
  for (const std::string& p : policies) {
    if (std::find(PolicyNames().begin(), PolicyNames().end(), p) == PolicyNames().end()) {
      std::cerr << "gpuslice-place: --policies: unknown policy '" << p << "'; valid: " << all_policies << "\n";
      return 2;
    }
  }
  auto nodes_or = ReadNodeList(nodes_path);
  if (auto* e = std::get_if<TraceError>(&nodes_or)) {
    std::cerr << "gpuslice-place: " << e->message << "\n";
    return 2;
  }
  auto pods_or = ReadPodList(pods_path);
  if (auto* e = std::get_if<TraceError>(&pods_or)) {
    std::cerr << "gpuslice-place: " << e->message << "\n";
    return 2;
  }
  const auto& nodes = std::get<std::vector<NodeSpec>>(nodes_or);
  auto& pods = std::get<std::vector<PodSpec>>(pods_or);
  if (std::string bad = CheckHasGpus(nodes_path, nodes); !bad.empty()) {
    std::cerr << "gpuslice-place: " << bad << "\n";
    return 2;
  }
  if (std::string bad = CheckGpuModels(pods_path, pods, nodes); !bad.empty()) {
    std::cerr << "gpuslice-place: " << bad << "\n";
    return 2;
  }
  if (title.empty()) title = std::filesystem::path(pods_path).stem().string();

  const Experiment experiment = PrepareExperiment(nodes, pods);
  for (const ImpossibleClass& c : experiment.impossible) std::cerr << ImpossibleWarning(pods_path, c) << "\n";
  std::vector<uint64_t> seed_list;
  for (int i = 0; i < seeds; ++i) seed_list.push_back(first_seed + static_cast<uint64_t>(i));
  std::atomic<int64_t> pods_done{0};
  RunOptions options;
  options.inflation = inflation;
  options.pods_done = &pods_done;
  options.tuning = options_tuning;
  options.tuning.memory_aware = !no_memory;
  options.gangs = gangs;
  options.nvlink_island = nvlink_island;
  options.prefer_island = nvlink_prefer;
  options.pcie_over_nvlink = pcie_gbps / nvlink_gbps;
  options.tiers = tiers != "none";
  options.tiers_apart = tiers_apart;
  options.random_paid_fraction = tiers == "random" ? tier_paid_fraction : -1;
  options.tier_seed = tier_seed;
  if (tiers_apart && tiers == "none") {
    std::cerr << "gpuslice-place: --tiers-apart needs --tiers qos or --tiers random\n";
    return 2;
  }
  if (tiers == "qos") {
    if (std::string bad = CheckQos(pods_path, pods); !bad.empty()) {
      std::cerr << "gpuslice-place: " << bad << "\n";
      return 2;
    }
  }
  mig.nodes = SplitList(mig_nodes_text);
  if (mig.isolate_paid && tiers == "none") {
    std::cerr << "gpuslice-place: --mig-isolate needs --tiers qos or --tiers random (the paid tier's shares are isolated)\n";
    return 2;
  }
  if ((mig.isolate_paid || mig.open) && !mig.Enabled()) {
    std::cerr << "gpuslice-place: --mig-isolate and --mig-open need MIG nodes: --mig-fraction F (0 < F <= 1) or --mig-nodes a,b\n";
    return 2;
  }
  if (mig.Enabled()) {
    if (std::string bad = ParseMigLayout(mig, &options.mig_layout); !bad.empty()) {
      std::cerr << "gpuslice-place: " << bad << "\n";
      return 2;
    }
    Cluster check = experiment.cluster;
    if (std::string bad = MarkMigNodes(check, experiment.node_names, mig, options.mig_layout); !bad.empty()) {
      std::cerr << "gpuslice-place: " << bad << " in " << nodes_path << "\n";
      return 2;
    }
  }
  options.mig = mig;
  if (nvlink_prefer && nvlink_island == 0) {
    std::cerr << "gpuslice-place: --nvlink-prefer needs --nvlink-island N (GPUs per island, 1 to 8)\n";
    return 2;
  }
  if ((app.count("--nvlink-gbps") > 0 || app.count("--pcie-gbps") > 0) && nvlink_island == 0) {
    std::cerr << "gpuslice-place: --nvlink-gbps and --pcie-gbps need --nvlink-island N (GPUs per island, 1 to 8)\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const bool show_progress = !quiet;
  auto progress = [&](int done, int total) {
    if (!show_progress) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\rgpuslice-place: %d/%d runs done, %lld pods placed, %.0f s", done, total,
                 static_cast<long long>(pods_done.load()), seconds);
    std::fflush(stderr);
  };
  if (replay) {
    for (const PodSpec& pod : pods) {
      if (pod.creation_time < 0 || pod.deletion_time < 0) {
        std::cerr << "gpuslice-place: --replay needs creation_time and deletion_time for every pod; " << pods_path << ":"
                  << pod.line << " has " << (pod.creation_time < 0 ? "none for creation_time" : "none for deletion_time")
                  << " (the 11-column pod lists have them)\n";
        return 2;
      }
    }
    replay_options.tuning = options.tuning;
    replay_options.mig = options.mig;
    replay_options.mig_layout = options.mig_layout;
    replay_options.pool.nodes = SplitList(pool_nodes_text);
    {
      Cluster check = experiment.cluster;
      if (std::string bad = MarkPool(check, experiment.node_names, replay_options.pool); !bad.empty()) {
        std::cerr << "gpuslice-place: " << bad << " in " << nodes_path << "\n";
        return 2;
      }
    }
    if (!pool_sweep_text.empty()) {
      std::vector<PoolSweepPoint> sweep;
      for (const std::string& item : SplitList(pool_sweep_text)) {
        char* end = nullptr;
        const double fraction = std::strtod(item.c_str(), &end);
        if (end == item.c_str() || *end != '\0' || fraction < 0 || fraction > 1) {
          std::cerr << "gpuslice-place: --pool-sweep: '" << item << "' is not a fraction between 0 and 1\n";
          return 2;
        }
        sweep.push_back(PoolSweepPoint{fraction, {}});
      }
      const size_t per_point = policies.size() * seed_list.size();
      for (PoolSweepPoint& point : sweep) point.results.resize(per_point);
      ParallelFor(
          static_cast<int>(sweep.size() * per_point), jobs,
          [&](int task) {
            const size_t point = static_cast<size_t>(task) / per_point, rest = static_cast<size_t>(task) % per_point;
            ReplayOptions o = replay_options;
            o.pool.fraction = sweep[point].fraction;
            o.pool.nodes.clear();
            ReplayResult& r = sweep[point].results[rest];
            r = Replay(experiment, policies[rest / seed_list.size()], seed_list[rest % seed_list.size()], o);
            // The hourly series run to the last pod's end (months at large duration scales): not kept here.
            for (std::vector<double>* v : {&r.hourly_allocated_pct, &r.hourly_queued, &r.hourly_stranded_pct}) {
              *v = std::vector<double>();  // a move frees the memory; `= {}` would keep it
            }
          },
          progress);
      if (show_progress) std::fprintf(stderr, "\n");
      std::ostringstream summary, table;
      WritePoolSweepSummary(summary, sweep, replay_options.pool.min_gpus, title);
      std::cout << summary.str();
      if (out_dir.empty()) return 0;
      std::filesystem::create_directories(out_dir);
      const std::filesystem::path dir(out_dir);
      WritePoolSweepTable(table, sweep);
      if (!WriteFile(dir / "pool-sweep.md", summary.str()) || !WriteFile(dir / "pool-sweep.dat", table.str()) ||
          !WriteFile(dir / "pool-sweep.gp",
                     PoolSweepGnuplot((dir / "pool-sweep.dat").string(), (dir / "pool-sweep.svg").string(), policies,
                                      replay_options.pool.min_gpus, "Reserved pool sweep, " + title))) {
        return 1;
      }
      if (!no_chart && std::system(("gnuplot '" + (dir / "pool-sweep.gp").string() + "'").c_str()) != 0) {
        std::cerr << "gpuslice-place: gnuplot failed or is missing (scripts/install-deps.sh installs gnuplot-nox)\n";
        return 1;
      }
      return 0;
    }
    replay_options.tiers_apart = options.tiers_apart;
    replay_options.random_paid_fraction = options.random_paid_fraction;
    replay_options.tier_seed = options.tier_seed;
    std::vector<ReplayResult> results(policies.size() * seed_list.size());
    ParallelFor(
        static_cast<int>(results.size()), jobs,
        [&](int task) {
          const size_t p = static_cast<size_t>(task) / seed_list.size(), s = static_cast<size_t>(task) % seed_list.size();
          results[static_cast<size_t>(task)] = Replay(experiment, policies[p], seed_list[s], replay_options);
        },
        progress);
    if (show_progress) std::fprintf(stderr, "\n");
    std::ostringstream summary, csv;
    WriteReplaySummary(summary, results, title + (replay_options.backfill ? ", replay with backfill" : ", replay (FIFO)"));
    std::cout << summary.str();
    if (out_dir.empty()) return 0;
    std::filesystem::create_directories(out_dir);
    WriteReplayCsv(csv, results);
    const std::filesystem::path dir(out_dir);
    std::ostringstream replay_table;
    const std::vector<std::string> charted = WriteReplayTable(replay_table, results);
    if (!WriteFile(dir / "replay.csv", csv.str()) || !WriteFile(dir / "replay-summary.md", summary.str()) ||
        !WriteFile(dir / "replay.dat", replay_table.str()) ||
        !WriteFile(dir / "replay.gp",
                   ReplayGnuplot((dir / "replay.dat").string(), (dir / "replay.svg").string(), charted,
                                 title + (replay_options.backfill ? ", replay with backfill" : ", replay (FIFO)") +
                                     " (mean of " + std::to_string(seeds) + " seeds)",
                                 replay_chart_hours))) {
      return 1;
    }
    if (!no_chart && std::system(("gnuplot '" + (dir / "replay.gp").string() + "'").c_str()) != 0) {
      std::cerr << "gpuslice-place: gnuplot failed or is missing (scripts/install-deps.sh installs gnuplot-nox)\n";
      return 1;
    }
    return 0;
  }
  const std::vector<RunSeries> runs = RunAll(experiment, policies, seed_list, options, jobs, progress);
  if (show_progress) std::fprintf(stderr, "\n");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::ostringstream summary;
  WriteSummaryMarkdown(summary, Summarise(runs), title,
                       title.find("default") != std::string::npos && !gangs && !mig.Enabled());
  summary << "Cluster: " << nodes.size() << " nodes, " << experiment.cluster.total_gpus << " GPUs; " << pods.size()
          << " pods in the list, " << experiment.target.classes.size() << " target classes; " << seeds
          << " seeds from " << first_seed << ", inflation " << inflation << "; " << jobs << " threads, "
          << std::fixed << std::setprecision(1) << seconds << " s in all.\n";
  std::cout << summary.str();

  if (out_dir.empty()) return 0;
  const std::filesystem::path dir(out_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ostringstream csv, table, stranded_table;
  WriteMetricsCsv(csv, runs);
  WriteUnallocatedTable(table, runs);
  WriteStrandedTable(stranded_table, runs);
  const std::string chart_title = " (mean of " + std::to_string(seeds) + " seeds)";
  if (!WriteFile(dir / "metrics.csv", csv.str()) || !WriteFile(dir / "summary.md", summary.str()) ||
      !WriteFile(dir / "unallocated.dat", table.str()) || !WriteFile(dir / "stranded.dat", stranded_table.str()) ||
      !WriteFile(dir / "unallocated.gp",
                 GnuplotScript((dir / "unallocated.dat").string(), (dir / "unallocated.svg").string(), policies,
                               "Unallocated GPUs, " + title + chart_title)) ||
      !WriteFile(dir / "stranded.gp",
                 GnuplotScript((dir / "stranded.dat").string(), (dir / "stranded.svg").string(), policies,
                               "Stranded GPUs (idle, no unplaced pod can use them), " + title + chart_title,
                               "Stranded GPUs (% of cluster GPUs)"))) {
    return 1;
  }
  if (!no_chart) {
    for (const char* script : {"unallocated.gp", "stranded.gp"}) {
      const std::string command = "gnuplot '" + (dir / script).string() + "'";
      if (std::system(command.c_str()) != 0) {
        std::cerr << "gpuslice-place: gnuplot failed or is missing (scripts/install-deps.sh installs gnuplot-nox); "
                  << "the data is in " << dir.string() << "\n";
        return 1;
      }
    }
  }
  return 0;
}
