#include "place/replay.h"

#include <algorithm>
#include <deque>
#include <numeric>
#include <queue>

#include "place/policy.h"
#include "place/stranded.h"

namespace gpuslice::place {

ReplayResult Replay(const Experiment& experiment, const std::string& policy_name, uint64_t seed,
                    const ReplayOptions& options) {
  auto arrival = [&](int index) {
    return static_cast<int64_t>(static_cast<double>(experiment.times[static_cast<size_t>(index)].first) /
                                options.arrival_speedup);
  };
  Rng rng(seed ^ 0x5ca1ab1e0ddba11ULL);
  Cluster cluster = experiment.cluster;
  rng.Shuffle(cluster.nodes);  // the run's node order, as in RunOne
  const RunPods run_pods = PodsForRun(experiment, options.tiers_apart, options.random_paid_fraction, options.tier_seed);
  std::unique_ptr<Policy> policy =
      MakePolicy(policy_name, experiment.target, cluster, run_pods.score_classes, options.tuning);
  const std::vector<Pod>& pods = run_pods.pods;
  const Cluster empty = cluster;

  ReplayResult result;
  result.policy = policy_name;
  result.seed = seed;
  result.pods = static_cast<int>(pods.size());
  std::vector<int> order(pods.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return arrival(a) < arrival(b);
  });

  struct Running {
    int64_t end;
    int pod;
    Placement placement;
    bool operator>(const Running& o) const { return end > o.end || (end == o.end && pod > o.pod); }
  };
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  std::deque<int> queue;
  int queued_gpu_pods = 0;
  std::vector<double> waits;
  int64_t allocated = 0;
  std::vector<int> feasible;

  const double capacity = static_cast<double>(std::max<int64_t>(1, cluster.total_gpu_milli));
  int64_t now = order.empty() ? 0 : arrival(order[0]);
  const int64_t start = now;
  // Utilisation and stranding are averaged over the arrival window: long runs that outlast the
  // last arrival would otherwise dilute them.
  const int64_t window_end = order.empty() ? 0 : arrival(order.back());
  double alloc_integral = 0, idle_waiting_integral = 0, stranded_integral = 0;
  std::vector<double> hour_alloc, hour_queue, hour_stranded;
  StrandedMeter stranded(cluster.nodes.size());  // over the queued pods
  auto advance = [&](int64_t to) {  // integrate the state held from `now` to `to`
    const double stranded_now = now < to ? static_cast<double>(stranded.StrandedMilli(cluster)) : 0.0;
    while (now < to) {
      const int64_t hour = (now - start) / 3600;
      const int64_t step = std::min(to, start + (hour + 1) * 3600) - now;
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
  };
  auto try_start = [&](int index) {
    const Pod& pod = pods[static_cast<size_t>(index)];
    feasible.clear();
    for (size_t n = 0; n < cluster.nodes.size(); ++n) {
      if (Fits(cluster.nodes[n], pod)) feasible.push_back(static_cast<int>(n));
    }
    if (feasible.empty()) return false;
    const Placement placement = policy->Choose(cluster, pod, feasible, rng);
    Place(cluster.nodes[static_cast<size_t>(placement.node)], pod, placement.gpus);
    allocated += pod.TotalGpuMilli();
    const auto [created, deleted] = experiment.times[static_cast<size_t>(index)];
    const double duration = static_cast<double>(std::max<int64_t>(0, deleted - created)) * options.duration_scale;
    running.push(Running{now + static_cast<int64_t>(duration), index, placement});
    waits.push_back(static_cast<double>(now - arrival(index)));
    return true;
  };
  auto schedule = [&] {
    while (!queue.empty() && try_start(queue.front())) {
      queued_gpu_pods -= pods[static_cast<size_t>(queue.front())].num_gpu > 0;
      stranded.RemovePending(pods[static_cast<size_t>(queue.front())]);
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
      } else if (!try_start(*it)) {
        failed_shapes.push_back(&pod);
        ++it;
      } else {
        queued_gpu_pods -= pods[static_cast<size_t>(*it)].num_gpu > 0;
        stranded.RemovePending(pods[static_cast<size_t>(*it)]);
        it = queue.erase(it);
      }
    }
  };

  size_t next = 0;
  while (next < order.size() || !running.empty()) {
    const int64_t next_arrival = next < order.size() ? arrival(order[next]) : INT64_MAX;
    const int64_t next_end = running.empty() ? INT64_MAX : running.top().end;
    advance(std::min(next_arrival, next_end));
    while (!running.empty() && running.top().end <= now) {
      const Running done = running.top();
      running.pop();
      const Pod& pod = pods[static_cast<size_t>(done.pod)];
      Unplace(cluster.nodes[static_cast<size_t>(done.placement.node)], pod, done.placement.gpus);
      allocated -= pod.TotalGpuMilli();
    }
    while (next < order.size() && arrival(order[next]) <= now) {
      const int index = order[next++];
      const Pod& pod = pods[static_cast<size_t>(index)];
      bool could_fit = false;
      for (const NodeState& node : empty.nodes) could_fit = could_fit || Fits(node, pod);
      if (!could_fit) {
        ++result.never_fit;
        continue;
      }
      queue.push_back(index);
      queued_gpu_pods += pod.num_gpu > 0;
      stranded.AddPending(pod);
    }
    schedule();
  }
  result.never_started = static_cast<int>(queue.size());
  const double span = static_cast<double>(std::max<int64_t>(1, window_end - start));
  result.allocated_gpu_pct = 100.0 * alloc_integral / span / capacity;
  result.idle_while_waiting_gpu_pct = 100.0 * idle_waiting_integral / span / capacity;
  result.stranded_gpu_pct = 100.0 * stranded_integral / span / capacity;
  if (!waits.empty()) {
    result.mean_wait_s = std::accumulate(waits.begin(), waits.end(), 0.0) / static_cast<double>(waits.size());
    std::sort(waits.begin(), waits.end());
    result.p95_wait_s = waits[std::min(waits.size() - 1, static_cast<size_t>(0.95 * static_cast<double>(waits.size())))];
  }
  for (size_t h = 0; h < hour_alloc.size(); ++h) {
    result.hourly_allocated_pct.push_back(100.0 * hour_alloc[h] / 3600.0 / capacity);
    result.hourly_queued.push_back(hour_queue[h] / 3600.0);
    result.hourly_stranded_pct.push_back(100.0 * hour_stranded[h] / 3600.0 / capacity);
  }
  return result;
}

}  // namespace gpuslice::place
