// FGD's experiment: the inflated arrival sequence of one seed placed by one policy, with the
// cluster's metrics after every pod, averaged per 1% of arrived GPU demand the way the
// artifact's analysis scripts do (merge_*_discrete.py).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "place/cluster.h"
#include "place/fragmentation.h"
#include "place/impossible.h"
#include "place/mig.h"
#include "place/policy.h"

namespace gpuslice::place {

struct Experiment {
  Cluster cluster;
  std::vector<Pod> pods;  // the trace's pods sorted by name (the artifact's workload order)
  TargetWorkload target;
  // For a multi-GPU pod, one member of its gang (--gangs): one whole GPU and 1/k of its CPU
  // and memory, in a score class of its own. Other pods: themselves.
  std::vector<Pod> gang_members;
  // The trace's creation and deletion times per pod (-1: absent), for Replay.
  std::vector<std::pair<int64_t, int64_t>> times;
  int score_classes = 0;
  std::vector<std::string> node_names;  // in the cluster's order
  // Pods no node could hold even empty, by shape (impossible.h): in `pods`, not in `target`.
  std::vector<ImpossibleClass> impossible;
};

// Sorts the pods by name, resolves models, builds the target workload (95% popularity) from the
// pods some node could hold.
Experiment PrepareExperiment(const std::vector<NodeSpec>& nodes, std::vector<PodSpec> pods);

// One policy and seed. Vectors are indexed by arrived GPU demand in whole % of capacity,
// 0..max_percent; a NaN marks a percentage no pod arrival fell near.
struct RunSeries {
  std::string policy;
  uint64_t seed = 0;
  std::vector<double> allocated_gpu_pct;  // allocated milli-GPU / capacity
  std::vector<double> frag_gpu_pct;       // fragmented milli-GPU / capacity
  std::vector<double> frag_ratio_pct;     // fragmented / idle milli-GPU
  // Idle milli-GPU that no pod of the run still unplaced (failed, or yet to arrive) could use,
  // / capacity (stranded.h). Towards the end few pods are left to arrive, so it rises to the
  // unallocated share: the failed pods fit nowhere.
  std::vector<double> stranded_gpu_pct;
  std::vector<std::array<int, kPodKinds>> failed_pods;  // cumulative, by kind
  int arrivals = 0;
  int failed_total = 0;
  int gangs_placed = 0;           // with RunOptions::gangs
  int gang_nodes_total = 0;       // nodes the placed gangs span, summed
  int island_pods = 0;            // placed multi-GPU pods that one island could hold (nvlink_island)
  int island_pods_local = 0;      // of which all GPUs on one island
  int multi_gpu_pods = 0;         // placed multi-GPU pods (nvlink_island), of any size
  double pair_bandwidth_sum = 0;  // their RelativePairBandwidth, summed
  double seconds = 0;
  bool tiers_measured = false;
  int mixed_tier_gpus_max = 0;       // the most GPUs holding two tiers at once (RunOptions::tiers)
  int paid_pods = 0, free_pods = 0;  // arrivals by tier
  // MIG (RunOptions::mig): isolated arrivals and failures over the run; the instances, and those
  // held with the milli-GPU their pods ask for, when arrived demand first reaches 100% (or at the
  // end of a run that does not).
  bool mig_measured = false;
  int isolated_pods = 0, isolated_failed = 0;
  int mig_instances = 0, mig_used_at_100 = 0;
  int64_t mig_used_capacity_at_100 = 0, mig_pod_milli_at_100 = 0;

  double UnallocatedAt(int percent) const { return 100.0 - allocated_gpu_pct[static_cast<size_t>(percent)]; }
};

struct RunOptions {
  double inflation = 1.3;                     // arrived demand to reach, times capacity
  std::atomic<int64_t>* pods_done = nullptr;  // progress counter, bumped while running
  OurPolicyTuning tuning;
  // Gangs: every k-GPU pod (k > 1) becomes k one-GPU pods placed all or nothing, on any nodes
  // (FGD places a multi-GPU pod on one node). A gang that does not fit whole gives back what its
  // members took and fails as one pod of its kind.
  bool gangs = false;
  // NVLink islands of this many GPUs per node (0: none). With prefer_island, a multi-GPU pod
  // takes its GPUs from one island where it can (IslandFreeGpus) on the node its policy chose;
  // otherwise the artifact's first free GPUs. Either way the run counts the pods of 2..island GPUs
  // that got one island.
  int nvlink_island = 0;
  bool prefer_island = false;
  // PCIe's bandwidth over NVLink's, for the pairs of a multi-GPU pod's GPUs that cross islands
  // (RelativePairBandwidth). Default: V100 (the trace's 8-GPU nodes) NVLink 2, 300 GB/s a GPU,
  // against PCIe 3.0 x16, 32 GB/s both ways.
  double pcie_over_nvlink = 32.0 / 300.0;
  // Tiers (tiers.h): count GPUs holding two tiers; with tiers_apart, never let that happen.
  bool tiers = false;
  bool tiers_apart = false;
  // Tiers at random, paid with this probability (-1: the pods' own, from the trace's qos).
  double random_paid_fraction = -1;
  uint64_t tier_seed = 7;
  // MIG-partitioned nodes (mig.h); the layout as ParseMigLayout read it.
  MigOptions mig;
  MigLayout mig_layout;
};

// The experiment's pods (and gang members) as one run places them: tiers drawn at random or kept
// apart as the options say.
struct RunPods {
  std::vector<Pod> pods, gang_members;
  int score_classes = 0;
};
RunPods PodsForRun(const Experiment& experiment, bool tiers_apart, double random_paid_fraction, uint64_t tier_seed,
                   bool isolate_paid = false, bool mig_open = false);
// The run's cluster: `cluster` (the experiment's; `names` in its order) with MIG nodes
// partitioned as `mig` says (names checked by the caller), in the run's node order (a shuffle by
// `rng`).
Cluster ClusterForRun(Cluster cluster, const std::vector<std::string>& names, const MigOptions& mig,
                      const MigLayout& layout, Rng& rng);

RunSeries RunOne(const Experiment& experiment, const std::string& policy, uint64_t seed, const RunOptions& options);

// Calls task(0..total-1) on `jobs` threads; progress(done, total) every half second meanwhile.
void ParallelFor(int total, int jobs, const std::function<void(int)>& task,
                 const std::function<void(int runs_done, int runs_total)>& progress);

// Every policy x seed on `jobs` threads; results in policy-major order.
std::vector<RunSeries> RunAll(const Experiment& experiment, const std::vector<std::string>& policies,
                              const std::vector<uint64_t>& seeds, const RunOptions& options, int jobs,
                              const std::function<void(int runs_done, int runs_total)>& progress);

}  // namespace gpuslice::place
