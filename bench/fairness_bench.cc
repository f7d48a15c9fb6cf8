// gpuslice-fairness-bench: the compute scheduler measured against its targets, on the simulated
// GPU. Every scenario runs real `gpuslice-workload` processes — under the preloaded shim as
// tenants, or unmanaged (the simulated hardware's own equal time-slicing) for comparison — and
// reads the simulator's per-process device busy time (the ground truth) once per sample
// interval. Each figure is printed as one JSON line as soon as it is measured; a table of all of
// them, with the targets of the issue, follows at the end. docs/performance.md records a run.
//
//   gpuslice-fairness-bench [--seconds 20] [--sweep-seconds 10] [--arrivals 200] [--idle-pairs 3]
//                           [--latency-rounds 3] [--window 10]
//                           [--only equal,weighted,alone,limit,arrival,idle,latency,sweep]
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/version.h"
#include "bench/fairness_harness.h"
#include "broker/scheduler.h"

namespace gpuslice::fairness {
namespace {

struct Settings {
  double seconds = 20;        // measured time per run
  double sweep_seconds = 10;  // measured time per run of the quantum sweep
  double warmup = 1.0;        // after every process is ready, before the first sample
  double sample = 1.0;        // sample interval (the smallest window)
  double window = 10.0;       // the window of the ±pp and Jain figures
  int arrivals = 200;
  int idle_pairs = 3;
  int latency_rounds = 3;     // rounds of the four latency configurations         // alternating gpuslice / unmanaged runs of the idle figures
  std::set<std::string> only;
  Paths paths;
};

// One tenant of a run: `processes` workload processes with the same arguments.
struct TenantSpec {
  std::string name;
  std::vector<std::string> args;
  int request = 0;
  int limit = 0;
  int processes = 1;
};

const std::vector<std::string> kComputeArgs = {"compute", "--kernel-us", "1000", "--depth", "2", "--duration", "3600"};
const std::vector<std::string> kLatencyArgs = {"latency",   "--period-ms", "20",       "--kernels-per-request",
                                               "2",         "--kernel-us", "500",      "--duration",
                                               "3600"};

struct Run {
  std::vector<Sample> samples;          // samples[0] after the warm-up, then one per interval
  std::map<std::string, Json> results;  // each tenant's result line (its last spec's first process)
  bool ok = true;
  std::string error;
};

struct RunOptions {
  bool managed = true;
  double seconds = 20;
  uint64_t quantum_ns = 0;  // 0: leave the default
  bool set_policy = false;
  broker::SharingMode mode = broker::SharingMode::kTimeslice;
};

Run RunScenario(const Settings& s, const std::string& tag, const std::vector<TenantSpec>& tenants, const RunOptions& o) {
  Run run;
  Gpu gpu(s.paths, tag);
  if (o.set_policy && o.managed && !gpu.SetPolicy(o.mode, o.quantum_ns, &run.error)) {
    run.ok = false;
    return run;
  }
  std::map<std::string, Child*> first;
  for (const auto& t : tenants) {
    for (int p = 0; p < t.processes; ++p) {
      StartOptions start;
      start.managed = o.managed;
      start.request_pct = t.request;
      start.limit_pct = t.limit;
      Child* child = gpu.StartReady(t.name, t.args, start);
      if (!child) {
        run.ok = false;
        run.error = "tenant " + t.name + " did not start";
        return run;
      }
      if (p == 0) first[t.name] = child;  // a tenant of several specs: the last spec's first process
    }
  }
  SleepFor(s.warmup);
  const int intervals = std::max(1, static_cast<int>(std::lround(o.seconds / s.sample)));
  const uint64_t start = NowNs();
  run.samples.push_back(gpu.Take());
  for (int i = 1; i <= intervals; ++i) {
    const uint64_t due = start + static_cast<uint64_t>(i * s.sample * 1e9);
    const uint64_t now = NowNs();
    if (due > now) SleepFor(static_cast<double>(due - now) * 1e-9);
    run.samples.push_back(gpu.Take());
  }
  gpu.StopAll();
  for (const auto& [name, child] : first) run.results[name] = child->Result();
  return run;
}

// Consecutive windows of `k` sample intervals (at least one window: the whole run).
std::vector<std::pair<const Sample*, const Sample*>> Windows(const Run& run, int k) {
  std::vector<std::pair<const Sample*, const Sample*>> windows;
  const int n = static_cast<int>(run.samples.size()) - 1;
  k = std::clamp(k, 1, std::max(1, n));
  for (int i = 0; i + k <= n; i += k) windows.emplace_back(&run.samples[i], &run.samples[i + k]);
  return windows;
}

int WindowIntervals(const Settings& s) { return std::max(1, static_cast<int>(std::lround(s.window / s.sample))); }

double Round(double v, int digits = 4) {
  const double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

// --- the table ---

struct Row {
  std::string scenario;
  std::string figure;
  std::string value;
  std::string target;
  std::string verdict;  // "met", "MISSED", or "" (reported only)
};
std::vector<Row> g_rows;

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

void AddRow(std::string scenario, std::string figure, std::string value, std::string target = "", int met = -1) {
  g_rows.push_back({std::move(scenario), std::move(figure), std::move(value), std::move(target),
                    met < 0 ? "" : (met ? "met" : "MISSED")});
}

// The machine's 1-minute load average (the figures are timing-sensitive: each line carries it).
double Load1() {
  double load = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

void Emit(Json j) {
  j["load1"] = Load1();
  std::cout << j.dump() << std::endl;
}

void Fail(const std::string& scenario, const Run& run) {
  Emit({{"scenario", scenario}, {"error", run.error}});
  AddRow(scenario, "error", run.error);
}

double IdleOf(const Run& run) {
  return 1.0 - BusyFraction(run.samples.front(), run.samples.back());
}

std::vector<TenantSpec> ComputeTenants(const std::vector<int>& requests) {
  std::vector<TenantSpec> tenants;
  for (size_t i = 0; i < requests.size(); ++i)
    tenants.push_back({"t" + std::to_string(i), kComputeArgs, requests[i], 0, 1});
  return tenants;
}

// --- (a) equal requests ---
void Equal(const Settings& s) {
  for (int n : {2, 4, 8}) {
    const Run run = RunScenario(s, "equal" + std::to_string(n), ComputeTenants(std::vector<int>(n, 100 / n)),
                                {.managed = true, .seconds = s.seconds});
    if (!run.ok) return Fail("equal", run);
    const auto shares = SharesBetween(run.samples.front(), run.samples.back());
    std::vector<double> x;
    Json jshares = Json::object();
    for (const auto& [t, v] : shares) {
      x.push_back(v);
      jshares[t] = Round(v);
    }
    double jain_min_window = 1, jain_min_1s = 1;
    for (const auto& [a, b] : Windows(run, WindowIntervals(s))) {
      std::vector<double> w;
      for (const auto& [t, v] : SharesBetween(*a, *b)) w.push_back(v);
      jain_min_window = std::min(jain_min_window, Jain(w));
    }
    for (const auto& [a, b] : Windows(run, 1)) {
      std::vector<double> w;
      for (const auto& [t, v] : SharesBetween(*a, *b)) w.push_back(v);
      jain_min_1s = std::min(jain_min_1s, Jain(w));
    }
    const double jain = Jain(x);
    Emit({{"scenario", "equal"},
          {"tenants", n},
          {"seconds", s.seconds},
          {"shares", jshares},
          {"jain", Round(jain, 5)},
          {"jain_min_window", Round(jain_min_window, 5)},
          {"window_s", s.window},
          {"jain_min_1s", Round(jain_min_1s, 5)},
          {"device_busy", Round(1 - IdleOf(run))}});
    const std::string name = "equal, " + std::to_string(n) + " tenants";
    AddRow(name, "Jain, whole run", Fmt("%.4f", jain), ">= 0.99", jain >= 0.99);
    AddRow(name, "Jain, worst " + Fmt("%.0f", s.window) + " s window", Fmt("%.4f", jain_min_window), ">= 0.99",
           jain_min_window >= 0.99);
    AddRow(name, "Jain, worst 1 s window", Fmt("%.4f", jain_min_1s));
  }
}

// --- (b) weighted requests ---
void Weighted(const Settings& s) {
  for (const std::vector<int>& requests : {std::vector<int>{75, 25}, std::vector<int>{50, 30, 20}}) {
    std::string label;
    for (int r : requests) label += (label.empty() ? "" : "/") + std::to_string(r);
    const Run run = RunScenario(s, "weighted", ComputeTenants(requests), {.managed = true, .seconds = s.seconds});
    if (!run.ok) return Fail("weighted", run);
    int total_request = 0;
    for (int r : requests) total_request += r;
    auto worst = [&](int k) {
      double w = 0;
      for (const auto& [a, b] : Windows(run, k)) {
        const auto shares = SharesBetween(*a, *b);
        for (size_t i = 0; i < requests.size(); ++i) {
          const double entitled = static_cast<double>(requests[i]) / total_request;
          w = std::max(w, std::abs(shares.at("t" + std::to_string(i)) - entitled));
        }
      }
      return w;
    };
    const auto shares = SharesBetween(run.samples.front(), run.samples.back());
    Json tenants = Json::array();
    double whole = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const double entitled = static_cast<double>(requests[i]) / total_request;
      const double share = shares.at("t" + std::to_string(i));
      whole = std::max(whole, std::abs(share - entitled));
      tenants.push_back({{"request", requests[i]}, {"entitled", Round(entitled)}, {"share", Round(share)}});
    }
    const double worst_window = worst(WindowIntervals(s)), worst_1s = worst(1);
    Emit({{"scenario", "weighted"},
          {"requests", requests},
          {"seconds", s.seconds},
          {"tenants", tenants},
          {"worst_error_pp_whole", Round(whole * 100, 3)},
          {"worst_error_pp_window", Round(worst_window * 100, 3)},
          {"window_s", s.window},
          {"worst_error_pp_1s", Round(worst_1s * 100, 3)},
          {"device_busy", Round(1 - IdleOf(run))}});
    std::string got;
    for (size_t i = 0; i < requests.size(); ++i)
      got += (i ? "/" : "") + Fmt("%.1f", shares.at("t" + std::to_string(i)) * 100);
    AddRow("requests " + label, "shares % (whole run)", got);
    AddRow("requests " + label, "worst |share-entitled|, " + Fmt("%.0f", s.window) + " s windows",
           Fmt("%.2f pp", worst_window * 100), "<= 2 pp", worst_window <= 0.02);
    AddRow("requests " + label, "worst |share-entitled|, 1 s windows", Fmt("%.2f pp", worst_1s * 100));
  }
}

// --- (c) one tenant alone, request 25 ---
void Alone(const Settings& s) {
  const std::vector<TenantSpec> one = {{"alone", kComputeArgs, 25, 0, 1}};
  const Run managed = RunScenario(s, "alone", one, {.managed = true, .seconds = s.seconds});
  const Run unmanaged = RunScenario(s, "alone-unmanaged", one, {.managed = false, .seconds = s.seconds});
  if (!managed.ok) return Fail("alone", managed);
  if (!unmanaged.ok) return Fail("alone", unmanaged);
  const double m = BusyFraction(managed.samples.front(), managed.samples.back(), "alone");
  const double u = BusyFraction(unmanaged.samples.front(), unmanaged.samples.back(), "alone");
  Emit({{"scenario", "alone"},
        {"request", 25},
        {"seconds", s.seconds},
        {"device_share_gpuslice", Round(m)},
        {"device_share_unmanaged", Round(u)},
        {"relative", Round(m / u)}});
  AddRow("alone, request 25", "device time share, gpuslice (raw)", Fmt("%.2f %%", m * 100), ">= 97 %", m >= 0.97);
  AddRow("alone, request 25", "device time share, unmanaged", Fmt("%.2f %%", u * 100));
  AddRow("alone, request 25", "gpuslice / unmanaged", Fmt("%.2f %%", m / u * 100), ">= 97 %", m / u >= 0.97);
}

// --- (d) limit 30 alone ---
void Limit(const Settings& s) {
  const Run run = RunScenario(s, "limit", {{"limited", kComputeArgs, 25, 30, 1}}, {.managed = true, .seconds = s.seconds});
  if (!run.ok) return Fail("limit", run);
  const double whole = BusyFraction(run.samples.front(), run.samples.back(), "limited");
  double max_1s = 0, min_1s = 1;
  for (const auto& [a, b] : Windows(run, 1)) {
    max_1s = std::max(max_1s, BusyFraction(*a, *b, "limited"));
    min_1s = std::min(min_1s, BusyFraction(*a, *b, "limited"));
  }
  Emit({{"scenario", "limit"},
        {"limit", 30},
        {"seconds", s.seconds},
        {"device_share", Round(whole)},
        {"max_1s", Round(max_1s)},
        {"min_1s", Round(min_1s)}});
  AddRow("limit 30, alone", "device time share (whole run)", Fmt("%.2f %%", whole * 100), "<= 32 %", whole <= 0.32);
  AddRow("limit 30, alone", "highest 1 s window", Fmt("%.2f %%", max_1s * 100), "<= 32 %", max_1s <= 0.32);
}

// --- (e) arrival at an idle GPU ---
// `compute --kernels 1 --kernel-us 100` started on an idle GPU; its elapsed_s runs from just
// before its first launch to the end of the synchronisation that follows, so it includes the
// wait for the grant (and, under the shim, the gate's creation at the first launch). Three ways,
// interleaved so that drift of a busy machine hits them alike:
//   unmanaged: no shim;
//   new tenant: under the shim, every arrival a new tenant, the grant still held by the tenant
//     of the previous arrival, which has exited: the grant must be handed over;
//   same tenant: under the shim, every arrival the tenant that holds the grant (no hand-over).
// "new tenant" minus "same tenant" is the wait for the grant, everything else being equal.
void Arrival(const Settings& s) {
  Json out = {{"scenario", "arrival"}, {"runs", s.arrivals}, {"kernel_us", 100}};
  const char* names[3] = {"unmanaged", "gpuslice_new_tenant", "gpuslice_same_tenant"};
  std::vector<double> figures[3];
  std::unique_ptr<Gpu> gpus[3];
  for (int k = 0; k < 3; ++k) {
    gpus[k] = std::make_unique<Gpu>(s.paths, std::string("arrival-") + std::to_string(k));
    StartOptions start;
    start.managed = k != 0;
    // A tenant that used the GPU and left: the grant is still with it when the first arrival comes.
    gpus[k]->RunToEnd(k == 2 ? "arrival" : "previous", {"compute", "--kernels", "100"}, start);
  }
  for (int i = 0; i < s.arrivals; ++i) {
    for (int k = 0; k < 3; ++k) {
      StartOptions start;
      start.managed = k != 0;
      const std::string tenant = k == 1 ? "arrival-" + std::to_string(i) : "arrival";
      const Json result = gpus[k]->RunToEnd(tenant, {"compute", "--kernels", "1", "--kernel-us", "100"}, start);
      if (result.is_null()) {
        Run failed;
        failed.error = std::string("arrival run failed: ") + names[k];
        return Fail("arrival", failed);
      }
      figures[k].push_back(result.value("elapsed_s", 0.0) * 1e3);
      SleepFor(0.01);
    }
  }
  for (int k = 0; k < 3; ++k) {
    out[names[k]] = {{"p50_ms", Round(Percentile(figures[k], 0.5))},
                     {"p90_ms", Round(Percentile(figures[k], 0.9))},
                     {"p99_ms", Round(Percentile(figures[k], 0.99))},
                     {"max_ms", Round(Percentile(figures[k], 1.0))}};
  }
  const double wait_p50 = Percentile(figures[1], 0.5) - Percentile(figures[2], 0.5);
  const double wait_p99 = Percentile(figures[1], 0.99) - Percentile(figures[2], 0.99);
  const double added_p99 = Percentile(figures[1], 0.99) - Percentile(figures[0], 0.99);
  out["grant_wait_p50_ms"] = Round(wait_p50);
  out["grant_wait_p99_ms"] = Round(wait_p99);
  out["added_vs_unmanaged_p50_ms"] = Round(Percentile(figures[1], 0.5) - Percentile(figures[0], 0.5));
  out["added_vs_unmanaged_p99_ms"] = Round(added_p99);
  Emit(out);
  const std::string name = "arrival at an idle GPU";
  auto pair = [&](int k) {
    return Fmt("%.3f", Percentile(figures[k], 0.5)) + " / " + Fmt("%.3f ms", Percentile(figures[k], 0.99));
  };
  AddRow(name, "1st 100 us kernel done, p50 / p99: unmanaged", pair(0));
  AddRow(name, "same, gpuslice, grant held by a departed tenant", pair(1));
  AddRow(name, "same, gpuslice, grant already the tenant's", pair(2));
  AddRow(name, "hand-over minus none, p50 / p99", Fmt("%.3f", wait_p50) + " / " + Fmt("%.3f ms", wait_p99));
  // The wait for the grant plus the gate's creation: an upper bound on the wait.
  AddRow(name, "added vs unmanaged, p99", Fmt("%.3f ms", added_p99), "wait <= 1 ms", added_p99 <= 1.0);
}

// --- (f) idle time lost to hand-overs ---
// Two compute-bound tenants, under gpuslice and unmanaged, in alternating pairs of runs so that
// a busy machine's drift hits both sides alike: the figure is the median of the pairs'
// differences (each pair's runs last `seconds`).
struct IdleFigures {
  double managed_idle = 0, unmanaged_idle = 0, loss = 0, loss_min = 0, loss_max = 0;
  double worst_1s_error = 0;  // under gpuslice: the largest |share - 50%| of a 1 s window
  bool ok = false;
};
IdleFigures MeasureIdle(const Settings& s, double seconds, uint64_t quantum_ns) {
  IdleFigures f;
  const auto tenants = ComputeTenants({50, 50});
  std::vector<double> managed, unmanaged, loss;
  for (int pair = 0; pair < s.idle_pairs; ++pair) {
    const Run m = RunScenario(s, "idle", tenants,
                              {.managed = true, .seconds = seconds, .quantum_ns = quantum_ns, .set_policy = quantum_ns != 0});
    const Run u = RunScenario(s, "idle-unmanaged", tenants, {.managed = false, .seconds = seconds});
    if (!m.ok || !u.ok) return f;
    managed.push_back(IdleOf(m));
    unmanaged.push_back(IdleOf(u));
    for (const auto& [a, b] : Windows(m, 1))
      for (const auto& [t, share] : SharesBetween(*a, *b)) f.worst_1s_error = std::max(f.worst_1s_error, std::abs(share - 0.5));
    loss.push_back(managed.back() - unmanaged.back());
  }
  f.managed_idle = Percentile(managed, 0.5);
  f.unmanaged_idle = Percentile(unmanaged, 0.5);
  f.loss = Percentile(loss, 0.5);
  f.loss_min = Percentile(loss, 0);
  f.loss_max = Percentile(loss, 1);
  f.ok = true;
  return f;
}

Json IdleJson(const IdleFigures& f, double seconds, int pairs) {
  return {{"pairs", pairs},
          {"seconds_per_run", seconds},
          {"idle_gpuslice_median", Round(f.managed_idle)},
          {"idle_unmanaged_median", Round(f.unmanaged_idle)},
          {"idle_lost_to_handovers_median", Round(f.loss)},
          {"idle_lost_min", Round(f.loss_min)},
          {"idle_lost_max", Round(f.loss_max)},
          {"worst_share_error_pp_1s", Round(f.worst_1s_error * 100, 3)}};
}

void Idle(const Settings& s) {
  const double seconds = s.seconds / 2;
  const IdleFigures f = MeasureIdle(s, seconds, 0);
  if (!f.ok) {
    Run failed;
    failed.error = "idle run failed";
    return Fail("idle", failed);
  }
  Json out = {{"scenario", "idle"}, {"tenants", 2}, {"quantum_ms", broker::kDefaultQuantumNs / 1e6}};
  out.update(IdleJson(f, seconds, s.idle_pairs));
  Emit(out);
  AddRow("2 compute tenants, default quantum", "device idle, gpuslice / unmanaged (medians)",
         Fmt("%.2f", f.managed_idle * 100) + " / " + Fmt("%.2f %%", f.unmanaged_idle * 100));
  AddRow("2 compute tenants, default quantum", "idle lost to hand-overs (median of pairs)", Fmt("%.2f pp", f.loss * 100),
         "<= 3 %", f.loss <= 0.03);
  AddRow("2 compute tenants, default quantum", "same, lowest / highest pair",
         Fmt("%.2f", f.loss_min * 100) + " / " + Fmt("%.2f pp", f.loss_max * 100));
}

// --- (g) a latency-sensitive tenant beside a compute-bound one ---
struct LatencyFigures {
  Json result;
  double compute_share = 0;
  bool ok = false;
};
// The latency tenant and the compute tenant ask for 50% each. `level`: the latency tenant also
// runs a compute-bound process, so that it uses its whole entitlement and its virtual time stays
// level with the other tenant's (it is never owed the GPU), as a service that shares its
// tenant's slice with batch work of its own would.
LatencyFigures MeasureLatency(const Settings& s, double seconds, bool managed, bool with_compute, uint64_t quantum_ns,
                              bool level = false) {
  LatencyFigures f;
  std::vector<TenantSpec> tenants;
  if (with_compute) tenants.push_back({"compute", kComputeArgs, 50, 0, 1});
  if (level) tenants.push_back({"latency", kComputeArgs, 50, 0, 1});
  tenants.push_back({"latency", kLatencyArgs, 50, 0, 1});
  const Run run = RunScenario(s, "latency", tenants,
                              {.managed = managed, .seconds = seconds, .quantum_ns = quantum_ns, .set_policy = quantum_ns != 0});
  if (!run.ok) return f;
  f.result = run.results.at("latency");
  if (with_compute) f.compute_share = BusyFraction(run.samples.front(), run.samples.back(), "compute");
  f.ok = !f.result.is_null();
  return f;
}

Json LatencyJson(const Json& r) {
  Json j = Json::object();
  for (const char* key : {"p50_us", "p99_us", "max_us", "requests", "missed_periods"})
    if (r.contains(key)) j[key] = r[key];
  return j;
}

// Solo and shared, unmanaged and under gpuslice, in `latency_rounds` rounds that run the four
// configurations in turn (drift of a busy machine hits all alike); the figures are the medians
// over the rounds of each configuration's p50 and p99.
void Latency(const Settings& s) {
  const double seconds = s.seconds / 2;
  const char* names[4] = {"solo_unmanaged", "solo_gpuslice", "shared_unmanaged", "shared_gpuslice"};
  std::vector<double> p50[4], p99[4], share[4];
  std::vector<int> missed[4];
  for (int round = 0; round < s.latency_rounds; ++round) {
    for (int c = 0; c < 4; ++c) {
      const LatencyFigures f = MeasureLatency(s, seconds, c % 2 == 1, c >= 2, 0);
      if (!f.ok) {
        Run failed;
        failed.error = std::string("latency run failed: ") + names[c];
        return Fail("latency", failed);
      }
      p50[c].push_back(f.result.value("p50_us", 0.0) / 1e3);
      p99[c].push_back(f.result.value("p99_us", 0.0) / 1e3);
      missed[c].push_back(f.result.value("missed_periods", 0));
      share[c].push_back(f.compute_share);
    }
  }
  auto median = [](const std::vector<double>& v) { return Percentile(v, 0.5); };
  Json out = {{"scenario", "latency"},
              {"latency_tenant", "latency --period-ms 20 --kernels-per-request 2 --kernel-us 500"},
              {"compute_tenant", "compute --kernel-us 1000 --depth 2"},
              {"requests_pct", "50/50"},
              {"quantum_ms", broker::kDefaultQuantumNs / 1e6},
              {"rounds", s.latency_rounds},
              {"seconds_per_run", seconds}};
  for (int c = 0; c < 4; ++c) {
    Json rounds = Json::array();
    for (double v : p99[c]) rounds.push_back(Round(v, 3));
    out[names[c]] = {{"p50_ms_median", Round(median(p50[c]), 3)},
                     {"p99_ms_median", Round(median(p99[c]), 3)},
                     {"p99_ms_rounds", rounds},
                     {"missed_periods", missed[c]}};
    if (c >= 2) out[names[c]]["compute_share_median"] = Round(median(share[c]));
  }
  const double infl_u = median(p99[2]) - median(p99[0]), infl_m = median(p99[3]) - median(p99[1]);
  out["p99_inflation_ms_unmanaged"] = Round(infl_u, 3);
  out["p99_inflation_ms_gpuslice"] = Round(infl_m, 3);
  Emit(out);
  const std::string name = "latency tenant beside compute";
  auto pair = [&](int a, int b, const std::vector<double>* v) {
    return Fmt("%.2f", median(v[a])) + " / " + Fmt("%.2f ms", median(v[b]));
  };
  AddRow(name, "p50 solo, unmanaged / gpuslice", pair(0, 1, p50));
  AddRow(name, "p99 solo, unmanaged / gpuslice", pair(0, 1, p99));
  AddRow(name, "p50 shared, unmanaged / gpuslice", pair(2, 3, p50));
  AddRow(name, "p99 shared, unmanaged / gpuslice", pair(2, 3, p99));
  AddRow(name, "p99 inflation, unmanaged", Fmt("%.2f ms", infl_u));
  const double quantum_ms = broker::kDefaultQuantumNs / 1e6;
  AddRow(name, "p99 inflation, gpuslice", Fmt("%.2f ms", infl_m), "about one quantum (" + Fmt("%.0f ms", quantum_ms) + ")",
         infl_m <= quantum_ms * 1.5);
  AddRow(name, "compute tenant's device share, unmanaged / gpuslice",
         Fmt("%.1f", median(share[2]) * 100) + " / " + Fmt("%.1f %%", median(share[3]) * 100));
}

// --- (h) quantum sweep ---
// Per quantum: the idle figures of two compute-bound tenants (and how far their 1 s shares stray
// from 50%), and the latency tenant beside a compute-bound one twice: alone in its tenant (it
// uses ~5.5% of its 50%: it is owed the GPU whenever it asks) and level (its tenant also runs a
// compute-bound process, so it must wait for the other tenant's quantum to end).
void Sweep(const Settings& s) {
  for (uint64_t quantum_ms : {2, 5, 10, 20, 50}) {
    const double idle_seconds = s.sweep_seconds / 2;
    const uint64_t quantum_ns = quantum_ms * 1'000'000;
    const IdleFigures idle = MeasureIdle(s, idle_seconds, quantum_ns);
    const LatencyFigures owed = MeasureLatency(s, s.sweep_seconds, true, true, quantum_ns, false);
    const LatencyFigures even = MeasureLatency(s, s.sweep_seconds, true, true, quantum_ns, true);
    if (!idle.ok || !owed.ok || !even.ok) {
      Run failed;
      failed.error = "sweep run failed at " + std::to_string(quantum_ms) + " ms";
      return Fail("sweep", failed);
    }
    Json out = {{"scenario", "sweep"}, {"quantum_ms", quantum_ms}};
    out.update(IdleJson(idle, idle_seconds, s.idle_pairs));
    out["latency_seconds"] = s.sweep_seconds;
    out["latency_owed"] = LatencyJson(owed.result);
    out["compute_share_beside_latency_owed"] = Round(owed.compute_share);
    out["latency_level"] = LatencyJson(even.result);
    out["compute_share_beside_latency_level"] = Round(even.compute_share);
    Emit(out);
    const std::string name = "quantum " + std::to_string(quantum_ms) + " ms";
    AddRow(name, "idle lost / worst 1 s share error (2 tenants)",
           Fmt("%.2f pp", idle.loss * 100) + " / " + Fmt("%.2f pp", idle.worst_1s_error * 100));
    AddRow(name, "latency p99: owed / level tenant",
           Fmt("%.2f", owed.result.value("p99_us", 0.0) / 1e3) + " / " + Fmt("%.2f ms", even.result.value("p99_us", 0.0) / 1e3));
  }
}

void PrintTable() {
  size_t w[4] = {8, 6, 5, 6};
  for (const auto& r : g_rows) {
    w[0] = std::max(w[0], r.scenario.size());
    w[1] = std::max(w[1], r.figure.size());
    w[2] = std::max(w[2], r.value.size());
    w[3] = std::max(w[3], r.target.size());
  }
  auto line = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d,
                  const std::string& e) {
    std::printf("%-*s  %-*s  %*s  %-*s  %s\n", static_cast<int>(w[0]), a.c_str(), static_cast<int>(w[1]), b.c_str(),
                static_cast<int>(w[2]), c.c_str(), static_cast<int>(w[3]), d.c_str(), e.c_str());
  };
  std::printf("\n");
  line("scenario", "figure", "value", "target", "");
  std::string previous;
  for (const auto& r : g_rows) {
    line(r.scenario == previous ? "" : r.scenario, r.figure, r.value, r.target, r.verdict);
    previous = r.scenario;
  }
  std::fflush(stdout);
}

}  // namespace
}  // namespace gpuslice::fairness

int main(int argc, char** argv) {
  using namespace gpuslice::fairness;
  Settings s;
  std::string only;
  CLI::App app{"gpuslice-fairness-bench: the compute scheduler against its targets, on the simulated GPU"};
  app.set_version_flag("--version", "gpuslice-fairness-bench " GPUSLICE_VERSION, "Print the version and exit");
  app.add_option("--seconds", s.seconds, "measured seconds per run")->check(CLI::PositiveNumber);
  app.add_option("--sweep-seconds", s.sweep_seconds, "measured seconds per run of the quantum sweep")
      ->check(CLI::PositiveNumber);
  app.add_option("--window", s.window, "window of the Jain and +-pp figures, seconds")->check(CLI::PositiveNumber);
  app.add_option("--arrivals", s.arrivals, "runs of the idle-GPU arrival scenario")->check(CLI::PositiveNumber);
  app.add_option("--idle-pairs", s.idle_pairs, "alternating gpuslice/unmanaged run pairs per idle figure")
      ->check(CLI::PositiveNumber);
  app.add_option("--latency-rounds", s.latency_rounds, "rounds of the latency scenario's four runs")
      ->check(CLI::PositiveNumber);
  app.add_option("--only", only, "comma-separated: equal,weighted,alone,limit,arrival,idle,latency,sweep");
  CLI11_PARSE(app, argc, argv);
  std::stringstream list(only);
  for (std::string item; std::getline(list, item, ',');)
    if (!item.empty()) s.only.insert(item);
  s.window = std::min(s.window, s.seconds);

  const std::filesystem::path bin = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  s.paths = {bin.string(), (bin.parent_path() / "simlib").string(), (bin.parent_path() / "lib" / "libgpuslice.so").string()};
  for (const std::string& p : {s.paths.bin_dir + "/gpuslice-workload", s.paths.sim_lib_dir + "/libcuda.so.1", s.paths.shim_path}) {
    if (access(p.c_str(), R_OK) != 0) {
      std::fprintf(stderr, "gpuslice-fairness-bench: %s is missing (build the gpuslice-workload, gpuslice and gpuslice_sim_cuda targets)\n", p.c_str());
      return 2;
    }
  }
  const struct {
    const char* name;
    void (*run)(const Settings&);
  } scenarios[] = {{"equal", Equal}, {"weighted", Weighted}, {"alone", Alone}, {"limit", Limit},
                   {"arrival", Arrival}, {"idle", Idle}, {"latency", Latency}, {"sweep", Sweep}};
  for (const auto& scenario : scenarios) {
    if (s.only.empty() || s.only.count(scenario.name)) scenario.run(s);
  }
  PrintTable();
  return 0;
}
