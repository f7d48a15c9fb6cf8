#include "place/report.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "place/policy.h"

namespace gpuslice::place {
namespace {

// Where fmt::format_to appends to a text being built.
std::back_insert_iterator<std::string> To(std::string& text) { return std::back_inserter(text); }

// The policies of `results` (RunSeries or ReplayResult), in order of first appearance.
template <typename Run>
std::vector<std::string> PoliciesInOrder(const std::vector<Run>& results) {
  std::vector<std::string> order;
  for (const Run& run : results) {
    if (std::find(order.begin(), order.end(), run.policy) == order.end()) order.push_back(run.policy);
  }
  return order;
}

std::string Number(double value, int decimals) {
  if (std::isnan(value)) return "";
  return fmt::format("{:.{}f}", value, decimals);
}

double MeanAt(const std::vector<RunSeries>& runs, const std::string& policy, size_t percent,
              const std::vector<double> RunSeries::*field, bool unallocated) {
  double sum = 0;
  int count = 0;
  for (const RunSeries& run : runs) {
    if (run.policy != policy || percent >= (run.*field).size() || std::isnan((run.*field)[percent])) continue;
    sum += unallocated ? 100.0 - (run.*field)[percent] : (run.*field)[percent];
    ++count;
  }
  return count ? sum / count : std::nan("");
}

}  // namespace

std::string MetricsCsv(const std::vector<RunSeries>& runs) {
  std::string out =
      "policy,seed,arrived_gpu_pct,allocated_gpu_pct,unallocated_gpu_pct,frag_gpu_pct,frag_ratio_pct,stranded_gpu_pct";
  for (int k = 0; k < kPodKinds; ++k) fmt::format_to(To(out), ",failed_{}", PodKindName(static_cast<PodKind>(k)));
  out += '\n';
  for (const RunSeries& run : runs) {
    for (size_t p = 0; p < run.allocated_gpu_pct.size(); ++p) {
      if (std::isnan(run.allocated_gpu_pct[p])) continue;
      fmt::format_to(To(out), "{},{},{},{},{},{},{},{},{}\n", run.policy, run.seed, p,
                     Number(run.allocated_gpu_pct[p], 3), Number(100.0 - run.allocated_gpu_pct[p], 3),
                     Number(run.frag_gpu_pct[p], 3), Number(run.frag_ratio_pct[p], 3),
                     Number(run.stranded_gpu_pct[p], 3), fmt::join(run.failed_pods[p], ","));
    }
  }
  return out;
}

std::vector<PolicySummary> Summarise(const std::vector<RunSeries>& runs) {
  std::vector<PolicySummary> summary;
  for (const std::string& policy : PoliciesInOrder(runs)) {
    PolicySummary s;
    s.policy = policy;
    s.unallocated_at_100 = MeanAt(runs, policy, 100, &RunSeries::allocated_gpu_pct, true);
    s.unallocated_at_130 = MeanAt(runs, policy, 130, &RunSeries::allocated_gpu_pct, true);
    s.frag_at_100 = MeanAt(runs, policy, 100, &RunSeries::frag_gpu_pct, false);
    s.stranded_at_100 = MeanAt(runs, policy, 100, &RunSeries::stranded_gpu_pct, false);
    for (const RunSeries& run : runs) {
      if (run.policy != policy) continue;
      ++s.seeds;
      s.failed_at_130 += run.failed_total;
      s.seconds += run.seconds;
      s.gangs_placed += run.gangs_placed;
      s.nodes_per_gang += run.gang_nodes_total;
    }
    int64_t pairs = 0, local = 0, multi = 0;
    double bandwidth = 0;
    for (const RunSeries& run : runs) {
      if (run.policy != policy) continue;
      pairs += run.island_pods;
      local += run.island_pods_local;
      multi += run.multi_gpu_pods;
      bandwidth += run.pair_bandwidth_sum;
    }
    if (multi > 0) s.pair_bandwidth_pct = 100.0 * bandwidth / static_cast<double>(multi);
    int tiered = 0;
    double mixed = 0, paid = 0, arrivals = 0;
    for (const RunSeries& run : runs) {
      if (run.policy != policy || !run.tiers_measured) continue;
      ++tiered;
      mixed += run.mixed_tier_gpus_max;
      paid += run.paid_pods;
      arrivals += run.paid_pods + run.free_pods;
    }
    if (tiered > 0) {
      s.mixed_tier_gpus = mixed / tiered;
      s.paid_pct = arrivals > 0 ? 100.0 * paid / arrivals : 0;
    }
    int mig_runs = 0;
    double instances = 0, used = 0, used_capacity = 0, pod_milli = 0;
    for (const RunSeries& run : runs) {
      if (run.policy != policy || !run.mig_measured) continue;
      ++mig_runs;
      s.isolated_pods += run.isolated_pods;
      s.isolated_failed += run.isolated_failed;
      instances += run.mig_instances;
      used += run.mig_used_at_100;
      used_capacity += static_cast<double>(run.mig_used_capacity_at_100);
      pod_milli += static_cast<double>(run.mig_pod_milli_at_100);
    }
    if (mig_runs > 0) {
      s.isolated_pods /= mig_runs;
      s.isolated_failed /= mig_runs;
      s.mig_instances = instances / mig_runs;
      s.mig_used_pct_at_100 = instances > 0 ? 100.0 * used / instances : 0;
      s.mig_fill_pct_at_100 = used_capacity > 0 ? 100.0 * pod_milli / used_capacity : 0;
    }
    if (pairs > 0) s.on_one_island_pct = 100.0 * static_cast<double>(local) / static_cast<double>(pairs);
    s.nodes_per_gang = s.gangs_placed > 0 ? s.nodes_per_gang / s.gangs_placed : 0;
    s.gangs_placed /= std::max(1, s.seeds);
    s.failed_at_130 /= std::max(1, s.seeds);
    s.seconds /= std::max(1, s.seeds);
    summary.push_back(s);
  }
  return summary;
}

const std::map<std::string, double>& PublishedUnallocatedAt100() {
  static const std::map<std::string, double> kPublished = {{"Random", 13.70},       {"DotProd", 9.38},
                                                           {"GpuClustering", 8.35}, {"GpuPacking", 8.22},
                                                           {"BestFit", 7.14},       {"FGD", 4.77}};
  return kPublished;
}

std::string SummaryMarkdown(const std::vector<PolicySummary>& summary, const std::string& title,
                            bool compare_published) {
  bool gangs = false;
  bool islands = false, tiers = false, mig = false;
  for (const PolicySummary& s : summary) {
    mig = mig || s.mig_instances >= 0;
    tiers = tiers || s.mixed_tier_gpus >= 0;
    gangs = gangs || s.gangs_placed > 0;
    islands = islands || s.on_one_island_pct >= 0;
  }
  std::string out = fmt::format("### {}\n\n| Policy | Seeds | Unallocated GPU % at 100% arrived |", title);
  if (compare_published) out += " FGD artifact | Difference |";
  out += " at 130% | Fragmented GPU % at 100% | Stranded GPU % at 100% | Failed pods (all arrivals) |";
  if (gangs) out += " Gangs placed | Nodes per gang |";
  if (islands) out += " Multi-GPU pods on one NVLink island % | Multi-GPU pods' pair bandwidth, % of NVLink |";
  if (tiers) out += " Paid % of arrivals | GPUs holding two tiers (most at once) |";
  if (mig)
    out +=
        " Isolated pods (arrived) | Isolated failed | MIG instances | MIG instances used % at 100% | MIG instance fill % at 100% |";
  out += " Seconds per run |\n|---|---:|---:|";
  if (compare_published) out += "---:|---:|";
  fmt::format_to(To(out), "---:|---:|---:|---:|{}{}{}{}---:|\n", gangs ? "---:|---:|" : "", islands ? "---:|---:|" : "",
                 tiers ? "---:|---:|" : "", mig ? "---:|---:|---:|---:|---:|" : "");
  for (const PolicySummary& s : summary) {
    fmt::format_to(To(out), "| {} | {} | {} |", s.policy, s.seeds, Number(s.unallocated_at_100, 2));
    if (compare_published) {
      auto it = PublishedUnallocatedAt100().find(s.policy);
      if (it == PublishedUnallocatedAt100().end()) {
        out += " – | – |";
      } else {
        fmt::format_to(To(out), " {} | {}{} |", Number(it->second, 2), s.unallocated_at_100 >= it->second ? "+" : "",
                       Number(s.unallocated_at_100 - it->second, 2));
      }
    }
    fmt::format_to(To(out), " {} | {} | {} | {} | ", Number(s.unallocated_at_130, 2), Number(s.frag_at_100, 2),
                   Number(s.stranded_at_100, 2), Number(s.failed_at_130, 1));
    if (gangs) fmt::format_to(To(out), "{} | {} | ", Number(s.gangs_placed, 1), Number(s.nodes_per_gang, 2));
    if (islands) fmt::format_to(To(out), "{} | {} | ", Number(s.on_one_island_pct, 1), Number(s.pair_bandwidth_pct, 1));
    if (tiers) fmt::format_to(To(out), "{} | {} | ", Number(s.paid_pct, 1), Number(s.mixed_tier_gpus, 1));
    if (mig) {
      fmt::format_to(To(out), "{} | {} | {} | {} | {} | ", Number(s.isolated_pods, 1), Number(s.isolated_failed, 1),
                     Number(s.mig_instances, 0), Number(s.mig_used_pct_at_100, 1), Number(s.mig_fill_pct_at_100, 1));
    }
    fmt::format_to(To(out), "{} |\n", Number(s.seconds, 1));
  }
  out += '\n';
  return out;
}

std::string ReplaySummary(const std::vector<ReplayResult>& results, const std::string& title) {
  std::string out = fmt::format(
      "### {}\n\n"
      "| Policy | Seeds | Mean wait (s) | p95 wait (s) | Big-job mean wait (s) | Allocated GPU % (time-weighted) | Idle GPU % while GPU pods wait "
      "| Stranded GPU % | Never started | Larger than any node | Pool GPUs | Evictions | Evicted GPU-hours |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      title);
  for (const std::string& policy : PoliciesInOrder(results)) {
    int n = 0;
    double wait = 0, p95 = 0, big = 0, alloc = 0, idle_waiting = 0, stranded = 0, never = 0, too_big = 0, pool = 0,
           evictions = 0, lost = 0;
    for (const ReplayResult& r : results) {
      if (r.policy != policy) continue;
      ++n;
      wait += r.mean_wait_s;
      p95 += r.p95_wait_s;
      big += r.big_mean_wait_s;
      pool += r.pool_gpus;
      evictions += r.evictions;
      lost += r.evicted_gpu_hours;
      alloc += r.allocated_gpu_pct;
      idle_waiting += r.idle_while_waiting_gpu_pct;
      stranded += r.stranded_gpu_pct;
      never += r.never_started;
      too_big += r.never_fit;
    }
    fmt::format_to(To(out), "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", policy, n,
                   Number(wait / n, 0), Number(p95 / n, 0), Number(big / n, 0), Number(alloc / n, 2),
                   Number(idle_waiting / n, 2), Number(stranded / n, 2), Number(never / n, 1), Number(too_big / n, 1),
                   Number(pool / n, 0), Number(evictions / n, 1), Number(lost / n, 1));
  }
  out += '\n';
  return out;
}

std::string ReplayCsv(const std::vector<ReplayResult>& results) {
  std::string out = "policy,seed,hour,allocated_gpu_pct,queued_pods,stranded_gpu_pct\n";
  for (const ReplayResult& r : results) {
    for (size_t h = 0; h < r.hourly_allocated_pct.size(); ++h) {
      fmt::format_to(To(out), "{},{},{},{},{},{}\n", r.policy, r.seed,
                     Number(static_cast<double>(h * r.series_bin_s) / 3600.0, 3), Number(r.hourly_allocated_pct[h], 3),
                     Number(r.hourly_queued[h], 2), Number(r.hourly_stranded_pct[h], 3));
    }
  }
  return out;
}

namespace {

std::string PercentTable(const std::vector<RunSeries>& runs, const std::vector<double> RunSeries::*field,
                         bool unallocated) {
  const std::vector<std::string> policies = PoliciesInOrder(runs);
  size_t max_percent = 0;
  for (const RunSeries& run : runs) max_percent = std::max(max_percent, run.allocated_gpu_pct.size());
  std::string out = "# arrived_gpu_pct";
  for (const std::string& p : policies) fmt::format_to(To(out), " {}", p);
  out += '\n';
  for (size_t k = 0; k < max_percent; ++k) {
    fmt::format_to(To(out), "{}", k);
    for (const std::string& p : policies) {
      const double v = MeanAt(runs, p, k, field, unallocated);
      fmt::format_to(To(out), " {}", std::isnan(v) ? std::string("NaN") : Number(v, 3));
    }
    out += '\n';
  }
  return out;
}

}  // namespace

namespace {

struct SweepMeans {
  double pool_gpus = 0, big_wait = 0, wait = 0, allocated = 0, evictions = 0, lost = 0;
};

SweepMeans MeansOf(const std::vector<ReplayResult>& results, const std::string& policy) {
  SweepMeans m;
  int n = 0;
  for (const ReplayResult& r : results) {
    if (r.policy != policy) continue;
    ++n;
    m.pool_gpus += r.pool_gpus;
    m.big_wait += r.big_mean_wait_s;
    m.wait += r.mean_wait_s;
    m.allocated += r.allocated_gpu_pct;
    m.evictions += r.evictions;
    m.lost += r.evicted_gpu_hours;
  }
  for (double* v : {&m.pool_gpus, &m.big_wait, &m.wait, &m.allocated, &m.evictions, &m.lost}) *v /= std::max(1, n);
  return m;
}

}  // namespace

std::string PoolSweepSummary(const std::vector<PoolSweepPoint>& sweep, int big_gpus, const std::string& title) {
  std::string out = fmt::format(
      "### {}: reserved pool sweep\n\n| Policy | Pool (asked, % of GPUs) | Pool | Big-job (>= {} GPUs) mean wait (s) | vs no pool | Mean wait, all (s) | Allocated GPU % | vs no pool (points) | Evictions | Evicted GPU-hours |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
      title, big_gpus);
  if (sweep.empty()) return out;
  for (const std::string& policy : PoliciesInOrder(sweep.front().results)) {
    const SweepMeans base = MeansOf(sweep.front().results, policy);
    for (const PoolSweepPoint& point : sweep) {
      const SweepMeans m = MeansOf(point.results, policy);
      const std::string versus =
          base.big_wait > 0 ? fmt::format("{}%", Number(100.0 * (m.big_wait - base.big_wait) / base.big_wait, 0)) : "–";
      fmt::format_to(To(out), "| {} | {} | {} GPUs | {} | {} | {} | {} | {} | {} | {} |\n", policy,
                     Number(100 * point.fraction, 0), Number(m.pool_gpus, 0), Number(m.big_wait, 0), versus,
                     Number(m.wait, 0), Number(m.allocated, 2), Number(m.allocated - base.allocated, 2),
                     Number(m.evictions, 1), Number(m.lost, 1));
    }
  }
  out += '\n';
  return out;
}

std::string PoolSweepTable(const std::vector<PoolSweepPoint>& sweep) {
  if (sweep.empty()) return "";
  const std::vector<std::string> policies = PoliciesInOrder(sweep.front().results);
  std::string out = "# pool_pct";
  for (const std::string& p : policies) fmt::format_to(To(out), " {0}_big_wait_s {0}_allocated_pct", p);
  out += '\n';
  for (const PoolSweepPoint& point : sweep) {
    out += Number(100 * point.fraction, 1);
    for (const std::string& p : policies) {
      const SweepMeans m = MeansOf(point.results, p);
      fmt::format_to(To(out), " {} {}", Number(m.big_wait, 1), Number(m.allocated, 3));
    }
    out += '\n';
  }
  return out;
}

std::vector<std::string> ReplayPolicies(const std::vector<ReplayResult>& results) { return PoliciesInOrder(results); }

std::string ReplayTable(const std::vector<ReplayResult>& results) {
  const std::vector<std::string> policies = PoliciesInOrder(results);
  size_t longest = 0, last_queued = 0;
  for (const ReplayResult& r : results) {
    longest = std::max(longest, r.hourly_allocated_pct.size());
    for (size_t h = 0; h < r.hourly_queued.size(); ++h) {
      if (r.hourly_queued[h] > 0) last_queued = std::max(last_queued, h);
    }
  }
  const int64_t bin = results.empty() ? 3600 : results[0].series_bin_s;
  bool queued = false;
  for (const ReplayResult& r : results)
    queued = queued || std::any_of(r.hourly_queued.begin(), r.hourly_queued.end(), [](double q) { return q > 0; });
  const size_t hours = queued ? std::min(longest, last_queued + last_queued / 4 + 1) : longest;
  std::string out = "# hour";
  for (const std::string& p : policies) fmt::format_to(To(out), " {0}_allocated_pct {0}_stranded_pct {0}_queued", p);
  out += '\n';
  for (size_t h = 0; h < hours; ++h) {
    out += Number(static_cast<double>(h * static_cast<size_t>(bin)) / 3600.0, 3);
    for (const std::string& p : policies) {
      double allocated = 0, stranded = 0, queued = 0;
      int n = 0;
      for (const ReplayResult& r : results) {
        if (r.policy != p) continue;
        ++n;  // a run whose series ended earlier holds nothing from then on
        if (h < r.hourly_allocated_pct.size()) {
          allocated += r.hourly_allocated_pct[h];
          stranded += r.hourly_stranded_pct[h];
          queued += r.hourly_queued[h];
        }
      }
      n = std::max(1, n);
      fmt::format_to(To(out), " {} {} {}", Number(allocated / n, 3), Number(stranded / n, 3), Number(queued / n, 2));
    }
    out += '\n';
  }
  return out;
}

std::string ReplayGnuplot(const std::string& table_path, const std::string& svg_path,
                          const std::vector<std::string>& policies, const std::string& title, double hours) {
  std::string s = fmt::format(
      "set terminal svg size 900,900 dynamic noenhanced font 'sans,12'\nset output '{}'\n"
      "set multiplot layout 3,1 title '{}'\n"
      "set grid\nset key outside right top vertical\nset yrange [0:*]\nset lmargin 10\nset rmargin 22\n",
      svg_path, title);
  if (hours > 0) fmt::format_to(To(s), "set xrange [0:{}]\n", hours);
  const char* const labels[3] = {"Allocated GPUs (%)", "Stranded GPUs (%)", "Queued pods"};
  for (int panel = 0; panel < 3; ++panel) {
    fmt::format_to(To(s), "set ylabel '{}'\n{}plot ", labels[panel],
                   panel == 2 ? "set xlabel 'Hours from the first arrival'\n" : "unset xlabel\n");
    for (size_t i = 0; i < policies.size(); ++i) {
      fmt::format_to(To(s), "{}'{}' using 1:{} with lines lw 2 lc {} title '{}'", i ? ", \\\n     " : "", table_path,
                     2 + 3 * i + static_cast<size_t>(panel), i + 1, policies[i]);
    }
    s += '\n';
  }
  s += "unset multiplot\n";
  return s;
}

std::string PoolSweepGnuplot(const std::string& table_path, const std::string& svg_path,
                             const std::vector<std::string>& policies, int big_gpus, const std::string& title) {
  std::string s = fmt::format(
      "set terminal svg size 800,500 dynamic noenhanced font 'sans,12'\nset title '{}'\n"
      "set xlabel 'Reserved whole-node pool (% of cluster GPUs asked)'\n"
      "set ylabel 'Mean wait of pods with >= {} GPUs (s)'\n"
      "set y2label 'Allocated GPUs, time-weighted (%)'\nset ytics nomirror\nset y2tics\nset y2range [0:*]\n"
      "set grid\nset key outside bottom center horizontal\nset yrange [0:*]\nset output '{}'\nplot ",
      title, big_gpus, svg_path);
  for (size_t i = 0; i < policies.size(); ++i) {
    fmt::format_to(To(s),
                   "{0}'{1}' using 1:{2} axes x1y1 with linespoints lw 2 lc {3} title '{4} wait', '{1}' using 1:{5} "
                   "axes x1y2 with linespoints lw 1 dt 2 lc {3} title '{4} allocated'",
                   i ? ", \\\n     " : "", table_path, 2 + 2 * i, i + 1, policies[i], 3 + 2 * i);
  }
  s += '\n';
  return s;
}

std::string UnallocatedTable(const std::vector<RunSeries>& runs) {
  return PercentTable(runs, &RunSeries::allocated_gpu_pct, true);
}

std::string StrandedTable(const std::vector<RunSeries>& runs) {
  return PercentTable(runs, &RunSeries::stranded_gpu_pct, false);
}

std::string GnuplotScript(const std::string& table_path, const std::string& svg_path,
                          const std::vector<std::string>& policies, const std::string& title,
                          const std::string& ylabel) {
  std::string plot = "plot ";
  for (size_t i = 0; i < policies.size(); ++i) {
    // gnuplot cycles 8 colours: from the 9th policy on, dashed lines keep them apart.
    fmt::format_to(To(plot), "{}'{}' using 1:{} with lines lw 2 dt {} title '{}'", i ? ", \\\n     " : "", table_path,
                   i + 2, i / 8 + 1, policies[i]);
  }
  plot += '\n';
  // The whole run, then the last part, where the policies differ, on a scale that shows it.
  std::string zoomed = svg_path;
  const size_t dot = zoomed.rfind(".svg");
  zoomed.insert(dot == std::string::npos ? zoomed.size() : dot, "-zoom");
  return fmt::format(
      "set terminal svg size 800,500 dynamic noenhanced font 'sans,12'\nset title '{}'\n"
      "set xlabel 'Arrived GPU demand (% of cluster GPUs)'\nset ylabel '{}'\nset grid\nset datafile missing 'NaN'\n"
      "set output '{}'\nset xrange [0:130]\nset yrange [0:*]\nset key top right\n{}"
      "set output '{}'\nset xrange [80:130]\nset yrange [0:20]\n{}",
      title, ylabel, svg_path, plot, zoomed, plot);
}

}  // namespace gpuslice::place
