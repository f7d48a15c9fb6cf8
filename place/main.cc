// gpuslice-place: FGD's placement experiment on the Alibaba GPU trace, every policy x seed; or a
// replay of the trace in time (--replay), optionally over a sweep of reserved pools. The options
// are place/command_line.h's; each mode is a function below.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>

#include "common/exit_codes.h"
#include "common/version.h"
#include "place/cluster_shape.h"
#include "place/command_line.h"
#include "place/experiment.h"
#include "place/mig.h"
#include "place/policy.h"
#include "place/pool.h"
#include "place/replay.h"
#include "place/report.h"
#include "place/tiers.h"
#include "place/trace.h"

using namespace gpuslice::place;

namespace {

using gpuslice::kExitFailure;
using gpuslice::kExitUsage;

using Progress = std::function<void(int done, int total)>;

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
    fmt::print(stderr, "gpuslice-place: cannot write {}\n", path.string());
    return false;
  }
  return true;
}

int Usage(const std::string& line) {
  fmt::print(stderr, "gpuslice-place: {}\n", line);
  return kExitUsage;
}

// Runs gnuplot on `script`; false with a line when it fails or is missing.
bool Chart(const std::filesystem::path& script, const std::string& data_dir = "") {
  if (std::system(fmt::format("gnuplot '{}'", script.string()).c_str()) == 0) return true;
  fmt::print(stderr, "gpuslice-place: gnuplot failed or is missing (scripts/install-deps.sh installs gnuplot-nox){}\n",
             data_dir.empty() ? "" : fmt::format("; the data is in {}", data_dir));
  return false;
}

struct Inputs {
  std::vector<std::string> policies;
  std::vector<NodeSpec> nodes;
  std::vector<PodSpec> pods;
  std::vector<uint64_t> seeds;
  std::string cluster_description;  // a drawn cluster's shape (--random-cluster)
};

// The policies, the node and pod lists and the seeds; 0, or the exit status after one line.
int LoadInputs(PlaceCommand& c, Inputs* in) {
  in->policies = SplitList(c.policies_text);
  if (in->policies.empty()) return Usage(fmt::format("--policies is empty; valid: {}", AllPolicies()));
  for (const std::string& p : in->policies) {
    if (std::find(PolicyNames().begin(), PolicyNames().end(), p) == PolicyNames().end())
      return Usage(fmt::format("--policies: unknown policy '{}'; valid: {}", p, AllPolicies()));
  }
  if (c.nodes_path.empty() == c.random_cluster_text.empty())
    return Usage("give the cluster as one of --nodes FILE or --random-cluster SPEC");
  if (c.random_cluster_text.empty()) {
    auto nodes_or = ReadNodeList(c.nodes_path);
    if (!nodes_or.ok()) return Usage(nodes_or.message());
    in->nodes = std::move(nodes_or).value();
  } else {
    auto spec_or = ParseShapeSpec(c.random_cluster_text);
    if (!spec_or.ok()) return Usage(spec_or.message());
    ClusterShape shape = MakeClusterShape(*spec_or);
    in->nodes = std::move(shape.nodes);
    in->cluster_description = fmt::format("random, {}", shape.description);
    c.nodes_path = fmt::format("--random-cluster {}", c.random_cluster_text);
  }
  if (!c.write_nodes_path.empty() && !WriteFile(c.write_nodes_path, NodeListCsv(in->nodes))) return kExitFailure;
  auto pods_or = ReadPodList(c.pods_path);
  if (!pods_or.ok()) return Usage(pods_or.message());
  in->pods = std::move(pods_or).value();
  if (std::string bad = CheckHasGpus(c.nodes_path, in->nodes); !bad.empty()) return Usage(bad);
  if (c.title.empty()) c.title = std::filesystem::path(c.pods_path).stem().string();
  for (int i = 0; i < c.seeds; ++i) in->seeds.push_back(c.first_seed + static_cast<uint64_t>(i));
  return 0;
}

// The run options from the command line, checked against each other and the experiment's
// cluster; 0, or the exit status after one line.
int BuildRunOptions(PlaceCommand& c, const CLI::App& app, const Inputs& in, const Experiment& experiment,
                    RunOptions* options) {
  options->inflation = c.inflation;
  options->tuning = c.tuning;
  options->tuning.memory_aware = !c.no_memory;
  options->gangs = c.gangs;
  options->nvlink_island = c.nvlink_island;
  options->prefer_island = c.nvlink_prefer;
  options->pcie_over_nvlink = c.pcie_gbps / c.nvlink_gbps;
  options->tiers = c.tiers != "none";
  options->tiers_apart = c.tiers_apart;
  options->random_paid_fraction = c.tiers == "random" ? c.tier_paid_fraction : -1;
  options->tier_seed = c.tier_seed;
  if (c.tiers_apart && c.tiers == "none") return Usage("--tiers-apart needs --tiers qos or --tiers random");
  if (c.tiers == "qos") {
    if (std::string bad = CheckQos(c.pods_path, in.pods); !bad.empty()) return Usage(bad);
  }
  c.mig.nodes = SplitList(c.mig_nodes_text);
  if (c.mig.isolate_paid && c.tiers == "none")
    return Usage("--mig-isolate needs --tiers qos or --tiers random (the paid tier's shares are isolated)");
  if ((c.mig.isolate_paid || c.mig.open) && !c.mig.Enabled())
    return Usage("--mig-isolate and --mig-open need MIG nodes: --mig-fraction F (0 < F <= 1) or --mig-nodes a,b");
  if (c.mig.Enabled()) {
    if (std::string bad = ParseMigLayout(c.mig, &options->mig_layout); !bad.empty()) return Usage(bad);
    Cluster check = experiment.cluster;
    if (std::string bad = MarkMigNodes(check, experiment.node_names, c.mig, options->mig_layout); !bad.empty())
      return Usage(fmt::format("{} in {}", bad, c.nodes_path));
  }
  options->mig = c.mig;
  if (c.nvlink_prefer && c.nvlink_island == 0)
    return Usage(fmt::format("--nvlink-prefer needs --nvlink-island N (GPUs per island, 1 to {})", kMaxGpusPerNode));
  if ((app.count("--nvlink-gbps") > 0 || app.count("--pcie-gbps") > 0) && c.nvlink_island == 0)
    return Usage(fmt::format("--nvlink-gbps and --pcie-gbps need --nvlink-island N (GPUs per island, 1 to {})",
                             kMaxGpusPerNode));
  return 0;
}

// --replay's own checks (every pod has its times, the pool's nodes exist) and options; 0, or the
// exit status after one line.
int PrepareReplay(PlaceCommand& c, const Inputs& in, const Experiment& experiment, const RunOptions& options) {
  for (const PodSpec& pod : in.pods) {
    if (pod.creation_time < 0 || pod.deletion_time < 0) {
      return Usage(fmt::format(
          "--replay needs creation_time and deletion_time for every pod; {}:{} has none for {} (the 11-column pod lists have them)",
          c.pods_path, pod.line, pod.creation_time < 0 ? "creation_time" : "deletion_time"));
    }
  }
  ReplayOptions& r = c.replay_options;
  r.tuning = options.tuning;
  r.mig = options.mig;
  r.mig_layout = options.mig_layout;
  r.pool.nodes = SplitList(c.pool_nodes_text);
  Cluster check = experiment.cluster;
  if (std::string bad = MarkPool(check, experiment.node_names, r.pool); !bad.empty())
    return Usage(fmt::format("{} in {}", bad, c.nodes_path));
  if (c.pool_sweep_text.empty()) {  // the sweep replays without tiers, as it always has
    r.tiers_apart = options.tiers_apart;
    r.random_paid_fraction = options.random_paid_fraction;
    r.tier_seed = options.tier_seed;
  }
  return 0;
}

// --pool-sweep: one replay per pool fraction, every policy and seed.
int RunPoolSweep(const PlaceCommand& c, const Inputs& in, const Experiment& experiment, const Progress& progress) {
  std::vector<PoolSweepPoint> sweep;
  for (const std::string& item : SplitList(c.pool_sweep_text)) {
    char* end = nullptr;
    const double fraction = std::strtod(item.c_str(), &end);
    if (end == item.c_str() || *end != '\0' || fraction < 0 || fraction > 1)
      return Usage(fmt::format("--pool-sweep: '{}' is not a fraction between 0 and 1", item));
    sweep.push_back(PoolSweepPoint{fraction, {}});
  }
  const size_t per_point = in.policies.size() * in.seeds.size();
  for (PoolSweepPoint& point : sweep) point.results.resize(per_point);
  ParallelFor(
      static_cast<int>(sweep.size() * per_point), c.jobs,
      [&](int task) {
        const size_t point = static_cast<size_t>(task) / per_point, rest = static_cast<size_t>(task) % per_point;
        ReplayOptions o = c.replay_options;
        o.pool.fraction = sweep[point].fraction;
        o.pool.nodes.clear();
        ReplayResult& r = sweep[point].results[rest];
        r = Replay(experiment, in.policies[rest / in.seeds.size()], in.seeds[rest % in.seeds.size()], o);
        // The hourly series run to the last pod's end (months at large duration scales): not kept here.
        for (std::vector<double>* v : {&r.hourly_allocated_pct, &r.hourly_queued, &r.hourly_stranded_pct}) {
          *v = std::vector<double>();  // a move frees the memory; `= {}` would keep it
        }
      },
      progress);
  if (!c.quiet) fmt::print(stderr, "\n");
  const std::string summary = PoolSweepSummary(sweep, c.replay_options.pool.min_gpus, c.title);
  fmt::print("{}", summary);
  if (c.out_dir.empty()) return 0;
  std::filesystem::create_directories(c.out_dir);
  const std::filesystem::path dir(c.out_dir);
  if (!WriteFile(dir / "pool-sweep.md", summary) || !WriteFile(dir / "pool-sweep.dat", PoolSweepTable(sweep)) ||
      !WriteFile(dir / "pool-sweep.gp",
                 PoolSweepGnuplot((dir / "pool-sweep.dat").string(), (dir / "pool-sweep.svg").string(), in.policies,
                                  c.replay_options.pool.min_gpus, fmt::format("Reserved pool sweep, {}", c.title))))
    return kExitFailure;
  return c.no_chart || Chart(dir / "pool-sweep.gp") ? 0 : kExitFailure;
}

// --replay: every policy and seed replayed in time.
int RunReplay(const PlaceCommand& c, const Inputs& in, const Experiment& experiment, const Progress& progress) {
  std::vector<ReplayResult> results(in.policies.size() * in.seeds.size());
  ParallelFor(
      static_cast<int>(results.size()), c.jobs,
      [&](int task) {
        const size_t p = static_cast<size_t>(task) / in.seeds.size(), s = static_cast<size_t>(task) % in.seeds.size();
        results[static_cast<size_t>(task)] = Replay(experiment, in.policies[p], in.seeds[s], c.replay_options);
      },
      progress);
  if (!c.quiet) fmt::print(stderr, "\n");
  const std::string title =
      fmt::format("{}{}", c.title, c.replay_options.backfill ? ", replay with backfill" : ", replay (FIFO)");
  const std::string summary = ReplaySummary(results, title);
  fmt::print("{}", summary);
  if (c.out_dir.empty()) return 0;
  std::filesystem::create_directories(c.out_dir);
  const std::filesystem::path dir(c.out_dir);
  if (!WriteFile(dir / "replay.csv", ReplayCsv(results)) || !WriteFile(dir / "replay-summary.md", summary) ||
      !WriteFile(dir / "replay.dat", ReplayTable(results)) ||
      !WriteFile(dir / "replay.gp",
                 ReplayGnuplot((dir / "replay.dat").string(), (dir / "replay.svg").string(), ReplayPolicies(results),
                               fmt::format("{} (mean of {} seeds)", title, c.seeds), c.replay_chart_hours)))
    return kExitFailure;
  return c.no_chart || Chart(dir / "replay.gp") ? 0 : kExitFailure;
}

// The placement experiment: every policy and seed until --inflation, its summary and charts.
int RunPlacement(const PlaceCommand& c, const Inputs& in, const Experiment& experiment, const RunOptions& options,
                 const Progress& progress, std::chrono::steady_clock::time_point start) {
  const std::vector<RunSeries> runs = RunAll(experiment, in.policies, in.seeds, options, c.jobs, progress);
  if (!c.quiet) fmt::print(stderr, "\n");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string summary = SummaryMarkdown(Summarise(runs), c.title,
                                        c.title.find("default") != std::string::npos && !c.gangs && !c.mig.Enabled() &&
                                            in.cluster_description.empty());
  if (!in.cluster_description.empty()) summary += fmt::format("Cluster shape: {}.\n\n", in.cluster_description);
  summary += fmt::format(
      "Cluster: {} nodes, {} GPUs; {} pods in the list, {} target classes; {} seeds from {}, inflation {}; {} threads, {:.1f} s in all.\n",
      in.nodes.size(), experiment.cluster.total_gpus, in.pods.size(), experiment.target.classes.size(), c.seeds,
      c.first_seed, c.inflation, c.jobs, seconds);
  fmt::print("{}", summary);
  if (c.out_dir.empty()) return 0;
  const std::filesystem::path dir(c.out_dir);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string chart_title = fmt::format("{} (mean of {} seeds)", c.title, c.seeds);
  if (!WriteFile(dir / "metrics.csv", MetricsCsv(runs)) || !WriteFile(dir / "summary.md", summary) ||
      !WriteFile(dir / "unallocated.dat", UnallocatedTable(runs)) ||
      !WriteFile(dir / "stranded.dat", StrandedTable(runs)) ||
      !WriteFile(dir / "unallocated.gp",
                 GnuplotScript((dir / "unallocated.dat").string(), (dir / "unallocated.svg").string(), in.policies,
                               fmt::format("Unallocated GPUs, {}", chart_title))) ||
      !WriteFile(dir / "stranded.gp",
                 GnuplotScript((dir / "stranded.dat").string(), (dir / "stranded.svg").string(), in.policies,
                               fmt::format("Stranded GPUs (idle, no unplaced pod can use them), {}", chart_title),
                               "Stranded GPUs (% of cluster GPUs)")))
    return kExitFailure;
  if (c.no_chart) return 0;
  for (const char* script : {"unallocated.gp", "stranded.gp"}) {
    if (!Chart(dir / script, dir.string())) return kExitFailure;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "gpuslice-place: trace-driven GPU placement simulator. Reproduces FGD's experiment (USENIX ATC'23): the "
      "trace's pods, shuffled by a seed and sampled with replacement until the GPUs they ask for reach --inflation "
      "times the cluster's, are placed one by one, never deleted; after each pod it records allocated GPUs, "
      "fragmentation and failed pods, and reports them per 1% of arrived GPU demand, averaged over seeds.");
  app.set_version_flag("--version", "gpuslice-place " GPUSLICE_VERSION, "Print the version and exit");
  PlaceCommand c;
  AddOptions(app, &c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? gpuslice::kExitOk : kExitUsage;  // --help and --version exit 0
  }

  Inputs in;
  if (const int code = LoadInputs(c, &in)) return code;
  const Experiment experiment = PrepareExperiment(in.nodes, in.pods);
  for (const ImpossibleClass& impossible : experiment.impossible)
    fmt::print(stderr, "{}\n", ImpossibleWarning(c.pods_path, impossible));
  std::atomic<int64_t> pods_done{0};
  RunOptions options;
  options.pods_done = &pods_done;
  if (const int code = BuildRunOptions(c, app, in, experiment, &options)) return code;

  const auto start = std::chrono::steady_clock::now();
  const Progress progress = [&](int done, int total) {
    if (c.quiet) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print(stderr, "\rgpuslice-place: {}/{} runs done, {} pods placed, {:.0f} s", done, total, pods_done.load(),
               seconds);
    std::fflush(stderr);
  };
  if (c.replay) {
    if (const int code = PrepareReplay(c, in, experiment, options)) return code;
    return c.pool_sweep_text.empty() ? RunReplay(c, in, experiment, progress)
                                     : RunPoolSweep(c, in, experiment, progress);
  }
  return RunPlacement(c, in, experiment, options, progress, start);
}
