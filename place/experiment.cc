#include "place/experiment.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include "place/inflation.h"
#include "place/policy.h"
#include "place/stranded.h"
#include "place/tiers.h"

namespace gpuslice::place {

Experiment PrepareExperiment(const std::vector<NodeSpec>& nodes, std::vector<PodSpec> pods) {
  std::stable_sort(pods.begin(), pods.end(), [](const PodSpec& a, const PodSpec& b) { return a.name < b.name; });
  Experiment experiment;
  experiment.cluster = BuildCluster(nodes);
  for (const NodeSpec& node : nodes) experiment.node_names.push_back(node.name);
  experiment.pods = BuildPods(pods, experiment.cluster, &experiment.score_classes);
  std::vector<bool> impossible;
  experiment.impossible = FindImpossiblePods(experiment.cluster, pods, experiment.pods, &impossible);
  if (experiment.impossible.empty()) {
    experiment.target = BuildTargetWorkload(pods, experiment.pods, 0.95);
  } else {
    std::vector<PodSpec> possible_specs;
    std::vector<Pod> possible_pods;
    for (size_t i = 0; i < pods.size(); ++i) {
      if (impossible[i]) continue;
      possible_specs.push_back(pods[i]);
      possible_pods.push_back(experiment.pods[i]);
    }
    experiment.target = BuildTargetWorkload(possible_specs, possible_pods, 0.95);
  }
  for (const PodSpec& pod : pods) experiment.times.emplace_back(pod.creation_time, pod.deletion_time);
  experiment.gang_members = experiment.pods;
  std::map<std::pair<int64_t, int64_t>, int> member_classes;
  for (Pod& member : experiment.gang_members) {
    if (member.num_gpu <= 1) continue;
    member.cpu_milli /= member.num_gpu;
    member.memory_mib /= member.num_gpu;
    member.num_gpu = 1;
    member.kind = PodKind::kOneGpu;
    auto [it, added] =
        member_classes.emplace(std::make_pair(member.cpu_milli, member.memory_mib), experiment.score_classes);
    if (added) ++experiment.score_classes;
    member.score_class = it->second;
  }
  return experiment;
}

RunPods PodsForRun(const Experiment& experiment, bool tiers_apart, double random_paid_fraction, uint64_t tier_seed,
                   bool isolate_paid, bool mig_open) {
  RunPods run{experiment.pods, experiment.gang_members, experiment.score_classes};
  if (random_paid_fraction >= 0) {
    AssignRandomTiers(run.pods, random_paid_fraction, tier_seed);
    for (size_t i = 0; i < run.pods.size(); ++i) run.gang_members[i].tier = run.pods[i].tier;
  }
  if (tiers_apart) {
    KeepTiersApart(run.pods, experiment.score_classes);
    run.score_classes = KeepTiersApart(run.gang_members, experiment.score_classes);
  }
  if (isolate_paid || mig_open) {
    MarkMigPods(run.pods, run.score_classes, isolate_paid, mig_open);
    run.score_classes =
        MarkMigPods(run.gang_members, run.score_classes, isolate_paid, mig_open);  // members are never shares
  }
  return run;
}

Cluster ClusterForRun(Cluster cluster, const std::vector<std::string>& names, const MigOptions& mig,
                      const MigLayout& layout, Rng& rng) {
  if (mig.Enabled()) MarkMigNodes(cluster, names, mig, layout);
  rng.Shuffle(cluster.nodes);
  return cluster;
}

namespace {

// Sums of the per-pod samples whose arrived demand rounds to each whole percent.
struct Buckets {
  explicit Buckets(size_t n) : count(n), allocated(n), frag(n), ratio(n), stranded(n), failed(n), seen(n) {}
  std::vector<int> count;
  std::vector<double> allocated, frag, ratio, stranded;
  std::vector<std::array<int, kPodKinds>> failed;  // at the last sample of the bucket
  std::vector<bool> seen;
};

// Each node's fragmentation (fragmentation.h) and, with tiers, its GPUs holding two tiers
// (tiers.h), and their sums over the cluster: kept current one node at a time as pods come and go.
struct NodeTallies {
  NodeTallies(const Cluster& cluster, const TargetWorkload& target, bool tiers)
      : target(target), tiers(tiers), node_frag(cluster.nodes.size()), node_mixed(cluster.nodes.size()) {
    for (size_t n = 0; n < cluster.nodes.size(); ++n) {
      node_frag[n] = NodeFragmentation(cluster.nodes[n], target);
      frag_total += node_frag[n];
    }
  }
  // After a pod is placed on or leaves node `node_index`.
  void Refresh(const Cluster& cluster, int node_index) {
    const double frag = NodeFragmentation(cluster.nodes[static_cast<size_t>(node_index)], target);
    frag_total += frag - node_frag[static_cast<size_t>(node_index)];
    node_frag[static_cast<size_t>(node_index)] = frag;
    if (!tiers) return;
    const int mixed = MixedTierGpus(cluster.nodes[static_cast<size_t>(node_index)]);
    mixed_total += mixed - node_mixed[static_cast<size_t>(node_index)];
    node_mixed[static_cast<size_t>(node_index)] = mixed;
  }

  const TargetWorkload& target;
  const bool tiers;
  std::vector<double> node_frag;
  double frag_total = 0;
  std::vector<int> node_mixed;
  int mixed_total = 0;
};

// numpy's round(): halves go to the even neighbour.
int RoundHalfEven(double x) { return static_cast<int>(std::nearbyint(x)); }

// A multi-GPU pod placed with NVLink islands on: its GPUs taken from one island where asked and
// it can be, and counted for the islands' and the pair bandwidth's figures.
void NvlinkIslands(const NodeState& node, const Pod& member, const RunOptions& options, Placement* placement,
                   RunSeries* series) {
  if (options.prefer_island) placement->gpus = IslandFreeGpus(node, member.num_gpu, options.nvlink_island);
  ++series->multi_gpu_pods;
  series->pair_bandwidth_sum += RelativePairBandwidth(placement->gpus, options.nvlink_island, options.pcie_over_nvlink);
  if (member.num_gpu <= options.nvlink_island) {
    ++series->island_pods;
    series->island_pods_local += PairsOnOneIsland(placement->gpus, options.nvlink_island) ==
                                 member.num_gpu * (member.num_gpu - 1) / 2;
  }
}

// A gang placed whole: the nodes its members span.
void CountGang(const std::vector<Placement>& placed, RunSeries* series) {
  std::vector<int> nodes;
  for (const Placement& p : placed) nodes.push_back(p.node);
  std::sort(nodes.begin(), nodes.end());
  ++series->gangs_placed;
  series->gang_nodes_total += static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

// The MIG instances in use, and the milli-GPU their pods ask, when the arrived demand first
// reaches the cluster's GPUs (or at the run's end).
void MigSnapshot(const Cluster& cluster, int64_t instance_milli, RunSeries* series) {
  for (const NodeState& node : cluster.nodes) {
    const MigUse use = CountMig(node);
    series->mig_used_at_100 += use.used;
    series->mig_used_capacity_at_100 += use.used_capacity_milli;
  }
  series->mig_pod_milli_at_100 = instance_milli;
}

// Per whole percent: the mean of its samples, or of the samples within one percent of it.
void AverageBuckets(const Buckets& buckets, size_t max_percent, RunSeries* out) {
  RunSeries& series = *out;
  const double nan = std::nan("");
  series.allocated_gpu_pct.assign(max_percent + 1, nan);
  series.frag_gpu_pct.assign(max_percent + 1, nan);
  series.frag_ratio_pct.assign(max_percent + 1, nan);
  series.stranded_gpu_pct.assign(max_percent + 1, nan);
  series.failed_pods.assign(max_percent + 1, std::array<int, kPodKinds>{});
  std::array<int, kPodKinds> last_failed{};
  for (size_t k = 0; k <= max_percent; ++k) {
    size_t lo = k, hi = k;
    if (buckets.count[k] == 0) {
      lo = k == 0 ? 0 : k - 1;
      hi = std::min(max_percent, k + 1);
    }
    int count = 0;
    double a = 0, f = 0, r = 0, st = 0;
    for (size_t b = lo; b <= hi; ++b) {
      count += buckets.count[b];
      a += buckets.allocated[b];
      f += buckets.frag[b];
      r += buckets.ratio[b];
      st += buckets.stranded[b];
    }
    if (count > 0) {
      series.allocated_gpu_pct[k] = a / count;
      series.frag_gpu_pct[k] = f / count;
      series.frag_ratio_pct[k] = r / count;
      series.stranded_gpu_pct[k] = st / count;
    }
    if (buckets.seen[k]) last_failed = buckets.failed[k];
    series.failed_pods[k] = last_failed;
  }
}

}  // namespace

RunSeries RunOne(const Experiment& experiment, const std::string& policy_name, uint64_t seed,
                 const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  // The artifact names nodes "<rand.Perm index>-<name>" and breaks score ties by name: a random
  // node order per seed, which the run's cluster takes on.
  const RunPods run_pods = PodsForRun(experiment, options.tiers_apart, options.random_paid_fraction, options.tier_seed,
                                      options.mig.isolate_paid && options.mig.Enabled(),
                                      options.mig.open && options.mig.Enabled());
  Rng rng(seed ^ 0x5ca1ab1e0ddba11ULL);
  Cluster cluster = ClusterForRun(experiment.cluster, experiment.node_names, options.mig, options.mig_layout, rng);
  std::unique_ptr<Policy> policy =
      MakePolicy(policy_name, experiment.target, cluster, run_pods.score_classes, options.tuning);
  const std::vector<int> arrivals = InflatedArrivals(run_pods.pods, cluster.total_gpu_milli, options.inflation, seed);

  const double capacity_gpus = std::max(1, cluster.total_gpus);
  // Up to the goal, or beyond it when the trace alone asks for more.
  int64_t demand = 0;
  for (int index : arrivals) demand += run_pods.pods[static_cast<size_t>(index)].TotalGpuMilli();
  const size_t max_percent =
      static_cast<size_t>(
          std::ceil(std::max(options.inflation * 100.0, static_cast<double>(demand) / capacity_gpus / 10.0))) +
      2;
  Buckets buckets(max_percent + 1);
  NodeTallies tallies(cluster, experiment.target, options.tiers);
  int64_t arrived = 0, allocated = 0;
  std::array<int, kPodKinds> failed{};
  // Every pod of the run is pending until placed (a gang as its member's shape).
  StrandedMeter stranded(cluster.nodes.size());
  auto pending_shape = [&](int index) -> const Pod& {
    const Pod& pod = run_pods.pods[static_cast<size_t>(index)];
    return options.gangs && pod.num_gpu > 1 ? run_pods.gang_members[static_cast<size_t>(index)] : pod;
  };
  for (int index : arrivals) stranded.AddPending(pending_shape(index));
  RunSeries series;
  series.policy = policy_name;
  series.seed = seed;

  auto sample = [&] {
    const int percent = RoundHalfEven(static_cast<double>(arrived) / capacity_gpus / 10.0);
    if (percent < 0 || static_cast<size_t>(percent) > max_percent) return;
    const size_t b = static_cast<size_t>(percent);
    const double idle = static_cast<double>(cluster.total_gpu_milli - allocated);
    buckets.count[b] += 1;
    buckets.allocated[b] += static_cast<double>(allocated) / capacity_gpus / 10.0;
    buckets.frag[b] += tallies.frag_total / capacity_gpus / 10.0;
    buckets.ratio[b] += idle > 0 ? 100.0 * tallies.frag_total / idle : 0.0;
    buckets.stranded[b] += static_cast<double>(stranded.StrandedMilli(cluster)) / capacity_gpus / 10.0;
    buckets.failed[b] = failed;
    buckets.seen[b] = true;
  };

  sample();
  std::vector<int> feasible;
  feasible.reserve(cluster.nodes.size());
  int since_report = 0;
  std::vector<Placement> placed;
  series.tiers_measured = options.tiers;
  series.mig_measured = options.mig.Enabled();
  for (const NodeState& node : cluster.nodes) series.mig_instances += CountMig(node).instances;
  int64_t instance_milli = 0;  // asked by the pods on MIG instances (never a gang member's)
  bool mig_snapshot_taken = false;
  auto mig_snapshot = [&] {
    if (!series.mig_measured || mig_snapshot_taken) return;
    mig_snapshot_taken = true;
    MigSnapshot(cluster, instance_milli, &series);
  };
  for (int index : arrivals) {
    const Pod& pod = run_pods.pods[static_cast<size_t>(index)];
    arrived += pod.TotalGpuMilli();
    (pod.tier == 1 ? series.paid_pods : series.free_pods) += 1;
    const bool gang = options.gangs && pod.num_gpu > 1;
    const Pod& member = gang ? run_pods.gang_members[static_cast<size_t>(index)] : pod;
    placed.clear();
    for (int m = 0; m < (gang ? pod.num_gpu : 1); ++m) {
      feasible.clear();
      for (size_t n = 0; n < cluster.nodes.size(); ++n) {
        if (Fits(cluster.nodes[n], member)) feasible.push_back(static_cast<int>(n));
      }
      if (feasible.empty()) break;
      Placement placement = policy->Choose(cluster, member, feasible, rng);
      if (options.nvlink_island > 0 && member.num_gpu > 1) {
        NvlinkIslands(cluster.nodes[static_cast<size_t>(placement.node)], member, options, &placement, &series);
      }
      Place(cluster.nodes[static_cast<size_t>(placement.node)], member, placement.gpus);
      allocated += member.TotalGpuMilli();
      if (cluster.nodes[static_cast<size_t>(placement.node)].mig) instance_milli += member.TotalGpuMilli();
      tallies.Refresh(cluster, placement.node);
      series.mixed_tier_gpus_max = std::max(series.mixed_tier_gpus_max, tallies.mixed_total);
      placed.push_back(placement);
    }
    if (static_cast<int>(placed.size()) < (gang ? pod.num_gpu : 1)) {
      for (auto it = placed.rbegin(); it != placed.rend(); ++it) {  // all or nothing
        Unplace(cluster.nodes[static_cast<size_t>(it->node)], member, it->gpus);
        allocated -= member.TotalGpuMilli();
        tallies.Refresh(cluster, it->node);
      }
      ++failed[static_cast<size_t>(pod.kind)];
      ++series.failed_total;
      series.isolated_failed += pod.isolated;
    } else {
      stranded.RemovePending(pending_shape(index));
    }
    series.isolated_pods += pod.isolated;
    if (arrived >= cluster.total_gpu_milli) mig_snapshot();
    if (gang && static_cast<int>(placed.size()) == pod.num_gpu) CountGang(placed, &series);
    sample();
    if (options.pods_done && ++since_report == 256) {
      options.pods_done->fetch_add(since_report, std::memory_order_relaxed);
      since_report = 0;
    }
  }
  if (options.pods_done) options.pods_done->fetch_add(since_report, std::memory_order_relaxed);
  mig_snapshot();  // a run that never reaches 100% arrived: at its end
  series.arrivals = static_cast<int>(arrivals.size());

  AverageBuckets(buckets, max_percent, &series);
  series.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return series;
}

void ParallelFor(int total, int jobs, const std::function<void(int)>& task,
                 const std::function<void(int, int)>& progress) {
  std::atomic<int> next{0}, done{0};
  auto worker = [&] {
    for (int i; (i = next.fetch_add(1)) < total;) {
      task(i);
      done.fetch_add(1);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, std::min(jobs, total)); ++t) threads.emplace_back(worker);
  while (progress && done.load() < total) {
    progress(done.load(), total);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (std::thread& t : threads) t.join();
  if (progress) progress(done.load(), total);
}

std::vector<RunSeries> RunAll(const Experiment& experiment, const std::vector<std::string>& policies,
                              const std::vector<uint64_t>& seeds, const RunOptions& options, int jobs,
                              const std::function<void(int, int)>& progress) {
  std::vector<RunSeries> results(policies.size() * seeds.size());
  ParallelFor(
      static_cast<int>(results.size()), jobs,
      [&](int task) {
        const size_t p = static_cast<size_t>(task) / seeds.size(), s = static_cast<size_t>(task) % seeds.size();
        results[static_cast<size_t>(task)] = RunOne(experiment, policies[p], seeds[s], options);
      },
      progress);
  return results;
}

}  // namespace gpuslice::place
