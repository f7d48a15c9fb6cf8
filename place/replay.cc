#include "place/replay.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <numeric>
#include <queue>

#include "place/policy.h"
#include "place/stranded.h"

namespace gpuslice::place {
namespace {

// Every start of a pod; a reclaimed backfill's entry goes inactive and it starts again later.
struct Started {
  int pod;
  Placement placement;
  int64_t start, end;
  bool reclaimable;  // backfilled on a pool node
  bool active;
};
using Ending = std::pair<int64_t, int>;  // (end, index into starts)

// One replay: the cluster, the queue and what is running, and the figures integrated over
// time. Run() takes the trace's events in time order: ends, then arrivals, then a pass over
// the queue (Schedule) at each.
struct ReplayRun {
  ReplayRun(const Experiment& experiment, const std::string& policy_name, uint64_t seed, const ReplayOptions& options);
  ReplayResult Run();

  int64_t Arrival(int index) const {
    return static_cast<int64_t>(static_cast<double>(experiment.times[static_cast<size_t>(index)].first) /
                                options.arrival_speedup);
  }
  bool IsBig(const Pod& pod) const { return pod.num_gpu >= options.pool.min_gpus; }
  void Advance(int64_t to);
  bool Collect(const Pod& pod, bool in_pool);
  void Stop(int id);
  int Reclaim(const Pod& pod);
  bool TryStart(int index);
  void Schedule();
  void Arrive(int index);
  void Summarise();

  const Experiment& experiment;
  const ReplayOptions& options;
  Rng rng;
  bool pooled = false;
  Cluster cluster;
  RunPods run_pods;
  std::unique_ptr<Policy> policy;
  const std::vector<Pod>& pods = run_pods.pods;
  Cluster empty;

  ReplayResult result;
  int64_t bin = 0;
  std::vector<int> order;  // the pods by arrival
  std::vector<Started> starts;
  std::priority_queue<Ending, std::vector<Ending>, std::greater<>> running;
  std::vector<std::vector<int>> reclaimable_on;
  std::deque<int> queue;
  std::vector<int> evicted;  // queued again, at the front, after this pass
  int queued_gpu_pods = 0;
  std::vector<int64_t> last_start;
  int64_t allocated = 0;
  std::vector<int> feasible;

  double capacity = 1;
  int64_t now = 0;
  int64_t start = 0;
  // Utilisation and stranding are averaged over the arrival window: long runs that outlast the
  // last arrival would otherwise dilute them.
  int64_t window_end = 0;
  double alloc_integral = 0, idle_waiting_integral = 0, stranded_integral = 0;
  std::vector<double> hour_alloc, hour_queue, hour_stranded;
  std::unique_ptr<StrandedMeter> stranded;  // over the queued pods
};

ReplayRun::ReplayRun(const Experiment& experiment, const std::string& policy_name, uint64_t seed,
                     const ReplayOptions& options)
    : experiment(experiment), options(options), rng(seed ^ 0x5ca1ab1e0ddba11ULL) {
  Cluster marked = experiment.cluster;
  MarkPool(marked, experiment.node_names, options.pool);  // names were checked by the caller
  pooled = std::any_of(marked.nodes.begin(), marked.nodes.end(), [](const NodeState& n) { return n.pool; });
  // MIG nodes marked, in the run's node order, as in RunOne.
  cluster = ClusterForRun(std::move(marked), experiment.node_names, options.mig, options.mig_layout, rng);
  run_pods = PodsForRun(experiment, options.tiers_apart, options.random_paid_fraction, options.tier_seed,
                        options.mig.isolate_paid && options.mig.Enabled(), options.mig.open && options.mig.Enabled());
  policy = MakePolicy(policy_name, experiment.target, cluster, run_pods.score_classes, options.tuning);
  empty = cluster;

  bin = std::max<int64_t>(1, options.series_bin_s);
  result.series_bin_s = bin;
  result.policy = policy_name;
  result.seed = seed;
  result.pods = static_cast<int>(pods.size());
  order.resize(pods.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return Arrival(a) < Arrival(b); });
  reclaimable_on.resize(cluster.nodes.size());
  last_start.assign(pods.size(), -1);
  for (const NodeState& node : cluster.nodes) result.pool_gpus += node.pool ? node.gpus : 0;

  capacity = static_cast<double>(std::max<int64_t>(1, cluster.total_gpu_milli));
  now = order.empty() ? 0 : Arrival(order[0]);
  start = now;
  window_end = order.empty() ? 0 : Arrival(order.back());
  stranded = std::make_unique<StrandedMeter>(cluster.nodes.size());
}

// Integrates the state held from `now` to `to`.
void ReplayRun::Advance(int64_t to) {
  const double stranded_now = now < to ? static_cast<double>(stranded->StrandedMilli(cluster)) : 0.0;
  while (now < to) {
    // Past the last arrival with nothing queued only the drain is left: one integration step,
    // and the series stops a day later (nothing can queue again; a long tail of runs scaled up
    // would otherwise fill it for months).
    if (queue.empty() && now >= window_end + 86400) {
      now = to;
      break;
    }
    const int64_t hour = (now - start) / bin;  // a bin of the series: an hour unless asked
    const int64_t step = std::min(to, start + (hour + 1) * bin) - now;
    if (static_cast<size_t>(hour) >= hour_alloc.size()) {
      hour_alloc.resize(static_cast<size_t>(hour) + 1);
      hour_queue.resize(static_cast<size_t>(hour) + 1);
      hour_stranded.resize(static_cast<size_t>(hour) + 1);
    }
    hour_stranded[static_cast<size_t>(hour)] += stranded_now * static_cast<double>(step);
    hour_alloc[static_cast<size_t>(hour)] += static_cast<double>(allocated) * static_cast<double>(step);
    hour_queue[static_cast<size_t>(hour)] += static_cast<double>(queue.size()) * static_cast<double>(step);
    const double in_window = static_cast<double>(std::max<int64_t>(0, std::min(now + step, window_end) - now));
    alloc_integral += static_cast<double>(allocated) * in_window;
    if (queued_gpu_pods > 0) idle_waiting_integral += (capacity - static_cast<double>(allocated)) * in_window;
    stranded_integral += stranded_now * in_window;
    now += step;
  }
}

// Feasible nodes in or out of the pool.
bool ReplayRun::Collect(const Pod& pod, bool in_pool) {
  feasible.clear();
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    if ((!pooled || cluster.nodes[n].pool == in_pool) && Fits(cluster.nodes[n], pod))
      feasible.push_back(static_cast<int>(n));
  }
  return !feasible.empty();
}

// Ends the start `id`: its pod leaves its node.
void ReplayRun::Stop(int id) {
  Started& s = starts[static_cast<size_t>(id)];
  const Pod& pod = pods[static_cast<size_t>(s.pod)];
  Unplace(cluster.nodes[static_cast<size_t>(s.placement.node)], pod, s.placement.gpus);
  allocated -= pod.TotalGpuMilli();
  s.active = false;
  if (s.reclaimable) {
    auto& on = reclaimable_on[static_cast<size_t>(s.placement.node)];
    on.erase(std::find(on.begin(), on.end(), id));
  }
}

// A big pod that fits nowhere: the pool node where evicting the latest-started backfills until
// it fits loses the least GPU time. Returns the node (its backfills evicted), or -1.
int ReplayRun::Reclaim(const Pod& pod) {
  int best = -1;
  size_t best_count = 0;
  double best_lost = 0;
  std::vector<int> best_order;
  for (size_t n = 0; n < cluster.nodes.size(); ++n) {
    if (reclaimable_on[n].empty()) continue;
    std::vector<int> latest_first = reclaimable_on[n];
    std::sort(latest_first.begin(), latest_first.end(), [&](int a, int b) {
      return starts[static_cast<size_t>(a)].start > starts[static_cast<size_t>(b)].start;
    });
    NodeState trial = cluster.nodes[n];
    double lost = 0;
    size_t count = 0;
    for (; count < latest_first.size() && !Fits(trial, pod); ++count) {
      const Started& s = starts[static_cast<size_t>(latest_first[count])];
      Unplace(trial, pods[static_cast<size_t>(s.pod)], s.placement.gpus);
      lost += static_cast<double>(pods[static_cast<size_t>(s.pod)].TotalGpuMilli()) *
              static_cast<double>(now - s.start);
    }
    if (Fits(trial, pod) && (best < 0 || lost < best_lost)) {
      best = static_cast<int>(n);
      best_lost = lost;
      best_count = count;
      best_order = std::move(latest_first);
    }
  }
  for (size_t i = 0; i < best_count; ++i) {
    const int id = best_order[i];
    Stop(id);
    evicted.push_back(starts[static_cast<size_t>(id)].pod);
    ++result.evictions;
  }
  result.evicted_gpu_hours += best_lost / kMilliPerGpu / 3600.0;
  return best;
}

// Starts pod `index` now if a node fits it (reclaiming pool nodes for a big pod); false if none does.
bool ReplayRun::TryStart(int index) {
  const Pod& pod = pods[static_cast<size_t>(index)];
  bool reclaimable = false;
  if (!pooled) {
    if (!Collect(pod, false)) return false;
  } else if (IsBig(pod)) {
    if (!Collect(pod, true) && !Collect(pod, false)) {
      const int node = Reclaim(pod);
      if (node < 0) return false;
      feasible.assign(1, node);
    }
  } else if (!Collect(pod, false)) {
    if (!Collect(pod, true)) return false;
    reclaimable = true;
  }
  const Placement placement = policy->Choose(cluster, pod, feasible, rng);
  Place(cluster.nodes[static_cast<size_t>(placement.node)], pod, placement.gpus);
  allocated += pod.TotalGpuMilli();
  const auto [created, deleted] = experiment.times[static_cast<size_t>(index)];
  const double duration = static_cast<double>(std::max<int64_t>(0, deleted - created)) * options.duration_scale;
  const int id = static_cast<int>(starts.size());
  starts.push_back(Started{index, placement, now, now + static_cast<int64_t>(duration), reclaimable, true});
  running.push(Ending{starts.back().end, id});
  if (reclaimable) reclaimable_on[static_cast<size_t>(placement.node)].push_back(id);
  last_start[static_cast<size_t>(index)] = now;
  return true;
}

// Starts the queue's head while it fits, then, with backfill, later pods that fit.
void ReplayRun::Schedule() {
  while (!queue.empty() && TryStart(queue.front())) {
    queued_gpu_pods -= pods[static_cast<size_t>(queue.front())].num_gpu > 0;
    stranded->RemovePending(pods[static_cast<size_t>(queue.front())]);
    queue.pop_front();
  }
  if (!options.backfill) return;
  // A pod shaped like one that just failed fails too: skip it without scanning the nodes.
  std::vector<const Pod*> failed_shapes;
  auto failed_before = [&](const Pod& pod) {
    for (const Pod* f : failed_shapes) {
      if (f->cpu_milli <= pod.cpu_milli && f->memory_mib <= pod.memory_mib && f->num_gpu == pod.num_gpu &&
          f->gpu_milli <= pod.gpu_milli && f->model_mask == pod.model_mask) {
        return true;
      }
    }
    return false;
  };
  int looked = 0;
  for (auto it = queue.begin(); it != queue.end() && looked < options.backfill_depth; ++looked) {
    const Pod& pod = pods[static_cast<size_t>(*it)];
    if (it == queue.begin() || failed_before(pod)) {
      if (it == queue.begin()) failed_shapes.push_back(&pod);
      ++it;
    } else if (!TryStart(*it)) {
      failed_shapes.push_back(&pod);
      ++it;
    } else {
      queued_gpu_pods -= pods[static_cast<size_t>(*it)].num_gpu > 0;
      stranded->RemovePending(pods[static_cast<size_t>(*it)]);
      it = queue.erase(it);
    }
  }
}

// Pod `index` arrives: it joins the queue, or is dropped if no empty node could hold it.
void ReplayRun::Arrive(int index) {
  const Pod& pod = pods[static_cast<size_t>(index)];
  bool could_fit = false;
  for (const NodeState& node : empty.nodes) could_fit = could_fit || Fits(node, pod);
  if (!could_fit) {
    ++result.never_fit;
    return;
  }
  queue.push_back(index);
  queued_gpu_pods += pod.num_gpu > 0;
  stranded->AddPending(pod);
}

ReplayResult ReplayRun::Run() {
  size_t next = 0;
  while (next < order.size() || !running.empty()) {
    const int64_t next_arrival = next < order.size() ? Arrival(order[next]) : INT64_MAX;
    const int64_t next_end = running.empty() ? INT64_MAX : running.top().first;
    Advance(std::min(next_arrival, next_end));
    while (!running.empty() && running.top().first <= now) {
      const int id = running.top().second;
      running.pop();
      if (starts[static_cast<size_t>(id)].active) Stop(id);
    }
    while (next < order.size() && Arrival(order[next]) <= now) Arrive(order[next++]);
    Schedule();
    while (!evicted.empty()) {  // reclaimed backfills queue again, first, and may start elsewhere
      for (auto it = evicted.rbegin(); it != evicted.rend(); ++it) {
        queue.push_front(*it);
        queued_gpu_pods += pods[static_cast<size_t>(*it)].num_gpu > 0;
        stranded->AddPending(pods[static_cast<size_t>(*it)]);
      }
      evicted.clear();
      Schedule();
    }
  }
  Summarise();
  return result;
}

// The result's figures from what the run integrated and when each pod last started.
void ReplayRun::Summarise() {
  result.never_started = static_cast<int>(queue.size());
  const double span = static_cast<double>(std::max<int64_t>(1, window_end - start));
  result.allocated_gpu_pct = 100.0 * alloc_integral / span / capacity;
  result.idle_while_waiting_gpu_pct = 100.0 * idle_waiting_integral / span / capacity;
  result.stranded_gpu_pct = 100.0 * stranded_integral / span / capacity;
  std::vector<double> waits;
  double big_waits = 0;
  for (size_t p = 0; p < pods.size(); ++p) {
    if (last_start[p] < 0) continue;
    waits.push_back(static_cast<double>(last_start[p] - Arrival(static_cast<int>(p))));
    if (IsBig(pods[p])) {
      big_waits += waits.back();
      ++result.big_started;
    }
  }
  if (result.big_started > 0) result.big_mean_wait_s = big_waits / result.big_started;
  if (!waits.empty()) {
    result.mean_wait_s = std::accumulate(waits.begin(), waits.end(), 0.0) / static_cast<double>(waits.size());
    std::sort(waits.begin(), waits.end());
    result.p95_wait_s =
        waits[std::min(waits.size() - 1, static_cast<size_t>(0.95 * static_cast<double>(waits.size())))];
  }
  for (size_t h = 0; h < hour_alloc.size(); ++h) {
    result.hourly_allocated_pct.push_back(100.0 * hour_alloc[h] / static_cast<double>(bin) / capacity);
    result.hourly_queued.push_back(hour_queue[h] / static_cast<double>(bin));
    result.hourly_stranded_pct.push_back(100.0 * hour_stranded[h] / static_cast<double>(bin) / capacity);
  }
}

}  // namespace

ReplayResult Replay(const Experiment& experiment, const std::string& policy_name, uint64_t seed,
                    const ReplayOptions& options) {
  return ReplayRun(experiment, policy_name, seed, options).Run();
}

}  // namespace gpuslice::place
