"""gpuslice-bench launch-bound: what gpuslice costs tenants whose speed is their launches.

With the simulated driver charging what real drivers charge per call (GPUSLICE_SIM_CALL_COSTS,
docs/simulator.md), each shape runs alone without gpuslice, alone under it, together without it
(unmanaged) and together under it, and reports launches (or steps) per second against the
same tenants without gpuslice, and the driver calls gpuslice adds per launch (all threads of
every process, its monitor included; launches themselves not counted; the few calls it makes
once per process — finding the device and its memory, measured on a short run — left out).
"""
import dataclasses
import json
import os

from . import tenant_runs
from .tenant_runs import Tenant

# The targets (docs/performance.md): calls added per launch while sharing, and alone; launches
# together and alone as a fraction of the same without gpuslice.
SHARED_CALLS_AT_MOST = 0.1
ALONE_CALLS_AT_MOST = 0.0
TOGETHER_AT_LEAST = 0.97
ALONE_AT_LEAST = 0.99
# How long each alone run lasts (at most): the alone comparison is many short pairs (see measure).
ALONE_SECONDS = 1.0


@dataclasses.dataclass
class Shape:
    name: str
    description: str
    tenants: list       # of Tenant (duration filled in at run time)
    rate_key: str       # what the result line counts per second


def _steps(per_step, kernel_us, seconds, graph=False, seed=1):
    argv = ["steps", "--kernels-per-step", str(per_step), "--kernel-us", kernel_us, "--duration", f"{seconds:g}",
            "--seed", str(seed)]
    return argv + (["--graph"] if graph else [])


def shapes(seconds):
    bursts = [Tenant("a", _steps(16, "20-50", seconds, seed=1), request=50),
              Tenant("b", _steps(16, "20-50", seconds, seed=2), request=50)]
    decode = [Tenant("a", _steps(200, "10-60", seconds, seed=3), request=50),
              Tenant("b", _steps(200, "10-60", seconds, seed=4), request=50)]
    graphs = [Tenant("a", _steps(200, "10-60", seconds, graph=True, seed=3), request=50),
              Tenant("b", _steps(200, "10-60", seconds, graph=True, seed=4), request=50)]
    service = [Tenant("service", ["latency", "--period-ms", "10", "--kernels-per-request", "4", "--kernel-us", "200",
                                  "--duration", f"{seconds:g}"], request=30, compute_class="latency"),
               Tenant("bursts", _steps(16, "20-50", seconds, seed=1), request=70)]
    return [
        Shape("bursts", "two tenants, bursts of 16 kernels of 20-50 us then a synchronisation, equal requests",
              bursts, "launches_per_s"),
        Shape("decode", "two LLM decode loops: steps of 200 kernels of 10-60 us then a synchronisation", decode,
              "launches_per_s"),
        Shape("decode-graphs", "the same decode steps, each captured once and launched as one CUDA graph", graphs,
              "steps_per_s"),
        Shape("service-beside-bursts", "a latency-class service (4 kernels of 200 us every 10 ms) beside bursts",
              service, "launches_per_s"),
    ]


def _rate(run, tenant, key):
    lines = run.results.get(tenant, [])
    if key == "launches_per_s" and lines and "launches_per_s" not in lines[0]:  # a latency service
        return sum(r["requests"] * r["kernels_per_request"] / r["elapsed_s"] for r in lines)
    return sum(r.get(key, 0.0) for r in lines)


def _short(tenant):
    """The tenant's workload for a handful of steps (or requests) instead of its duration."""
    argv = list(tenant.argv)
    i = argv.index("--duration")
    argv[i:i + 2] = ["--steps" if argv[0] == "steps" else "--requests", "20"]
    return dataclasses.replace(tenant, argv=argv)


def _non_launch_calls(calls):
    return sum(calls.values()) - tenant_runs.launches(calls)


def _short_runs(paths, tenant, costs, real_gpu):
    """The tenant for a handful of steps without and with gpuslice: what every process calls once
    (the workload's set-up; gpuslice's finding of the device, its UUID and memory, the context's
    teardown), left out of the per-launch figures."""
    return (tenant_runs.run(paths, [_short(tenant)], managed=False, costs=costs, real_gpu=real_gpu),
            tenant_runs.run(paths, [_short(tenant)], managed=True, costs=costs, real_gpu=real_gpu))


def _beyond(runs, shorts):
    """(non-launch calls, launches) of `runs` beyond those of `shorts`."""
    return (sum(_non_launch_calls(r.calls) for r in runs) - sum(_non_launch_calls(s.calls) for s in shorts),
            sum(tenant_runs.launches(r.calls) for r in runs) - sum(tenant_runs.launches(s.calls) for s in shorts))


def _added_per_launch(managed, managed_shorts, bare, bare_shorts):
    """Calls gpuslice adds per launch in steady state: the managed run's non-launch calls beyond
    its short runs', less what the workloads themselves call per launch (from the bare runs)."""
    bare_calls, bare_launches = _beyond([bare], bare_shorts)
    calls, launches = _beyond([managed], managed_shorts)
    if launches <= 0:
        return 0.0
    own_per_launch = bare_calls / bare_launches if bare_launches > 0 else 0.0
    return (calls - own_per_launch * launches) / launches


def _median(values):
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def _mean_and_half_width(values):
    """The mean of `values` and the half-width of its 95% interval (Student's t; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5
    return mean, _T95[min(n - 1, len(_T95)) - 1] * sd / n ** 0.5


# Student's t at 97.5% for 1..30 degrees of freedom (beyond: the normal's 1.96, near enough).
_T95 = [12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13, 2.12, 2.11,
        2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04] + [1.96]


def measure(paths, shape, costs, real_gpu=False, repeats=1, alone_pairs=16, alone_shape=None):
    """Alone (each tenant, without and with gpuslice, `alone_pairs` pairs of the short runs of
    `alone_shape`), then unmanaged and gpuslice together (`repeats` pairs of full runs). The two
    runs of a pair go back to back, in turn in either order, so that a drift of the host's speed
    falls on both. Alone, what separates two runs is mostly which cores the threads land on, not
    the run's length: many short pairs measure it better than a few long ones, and the ratio is
    their mean with its 95% interval. Together, each ratio is the median of the repeats'."""
    figures = {"shape": shape.name, "description": shape.description, "tenants": {}, "repeats": repeats,
               "alone_pairs": alone_pairs}
    shorts = {t.name: _short_runs(paths, t, costs, real_gpu) for t in shape.tenants}
    alone_tenants = {t.name: t for t in (alone_shape or shape).tenants}
    for t in shape.tenants:
        bare_rates, shimmed_rates, calls_added = [], [], []
        short_bare, short_managed = shorts[t.name]
        alone = alone_tenants[t.name]
        for i in range(alone_pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            runs = {m: tenant_runs.run(paths, [alone], managed=m, costs=costs, real_gpu=real_gpu) for m in order}
            bare_rates.append(_rate(runs[False], t.name, shape.rate_key))
            shimmed_rates.append(_rate(runs[True], t.name, shape.rate_key))
            calls_added.append(_added_per_launch(runs[True], [short_managed], runs[False], [short_bare]))
        ratios = [_ratio(s, b) for s, b in zip(shimmed_rates, bare_rates)]
        mean, half_width = _mean_and_half_width(ratios)
        figures["tenants"][t.name] = {
            "alone": _median(bare_rates),
            "alone_gpuslice": _median(shimmed_rates),
            "alone_ratios": ratios,
            "alone_ratio": mean,
            "alone_ratio_95": half_width,
            "alone_calls_added": max(calls_added),
            "startup_calls": _non_launch_calls(short_managed.calls) - _non_launch_calls(short_bare.calls),
        }
    rates = {t.name: {"unmanaged": [], "gpuslice": []} for t in shape.tenants}
    together, shared_calls = [], []
    for i in range(repeats):
        order = (False, True) if i % 2 == 0 else (True, False)
        runs = {m: tenant_runs.run(paths, shape.tenants, managed=m, costs=costs, real_gpu=real_gpu) for m in order}
        unmanaged, managed = runs[False], runs[True]
        for t in shape.tenants:
            rates[t.name]["unmanaged"].append(_rate(unmanaged, t.name, shape.rate_key))
            rates[t.name]["gpuslice"].append(_rate(managed, t.name, shape.rate_key))
        together.append(_ratio(sum(r["gpuslice"][-1] for r in rates.values()),
                               sum(r["unmanaged"][-1] for r in rates.values())))
        shared_calls.append(_added_per_launch(managed, [s[1] for s in shorts.values()], unmanaged,
                                              [s[0] for s in shorts.values()]))
    for t in shape.tenants:
        figures["tenants"][t.name]["unmanaged"] = _median(rates[t.name]["unmanaged"])
        figures["tenants"][t.name]["gpuslice"] = _median(rates[t.name]["gpuslice"])
        for run, mode in ((unmanaged, "unmanaged"), (managed, "gpuslice")):
            if "p99_us" in run.results[t.name][0]:
                figures["tenants"][t.name][mode + "_p99_ms"] = run.results[t.name][0]["p99_us"] / 1000
    figures["together_ratios"] = together
    figures["shared_calls_added"] = _median(shared_calls)
    figures["calls_gpuslice"] = {k: v for k, v in sorted(managed.calls.items()) if v}
    figures["calls_unmanaged"] = {k: v for k, v in sorted(unmanaged.calls.items()) if v}
    figures["rate_key"] = shape.rate_key
    return figures


def _alone_ratio(t):
    return t["alone_ratio"]


def _together_ratio(f):
    if f.get("together_ratios"):
        return _median(f["together_ratios"])
    return _ratio(sum(t["gpuslice"] for t in f["tenants"].values()), sum(t["unmanaged"] for t in f["tenants"].values()))


def _spread(ratios):
    return f"{min(ratios):.3f}-{max(ratios):.3f}"


def _ratio(a, b):
    return a / b if b else 0.0


def text(all_figures, costs, real_gpu=False):
    where = "the real GPU (driver calls not counted)" if real_gpu else f"simulated GPU, call costs '{costs}'"
    out = [f"launch-bound shapes, {where} (rates: per second; ratios: gpuslice over the same without it)", ""]
    header = f"{'shape':<22} {'tenant':<8} {'alone':>9} {'+gpuslice':>10} {'ratio':>6} {'unmanaged':>10} " \
             f"{'gpuslice':>9} {'ratio':>6}"
    out.append(header)
    for f in all_figures:
        for name, t in f["tenants"].items():
            out.append(f"{f['shape']:<22} {name:<8} {t['alone']:>9.0f} {t['alone_gpuslice']:>10.0f} "
                       f"{_alone_ratio(t):>6.3f} {t['unmanaged']:>10.0f} {t['gpuslice']:>9.0f} "
                       f"{_ratio(t['gpuslice'], t['unmanaged']):>6.3f}")
        together = _together_ratio(f)
        out.append(f"{'':<22} {'together':<8} {'':>9} {'':>10} {'':>6} {'':>10} {'':>9} {together:>6.3f}")
        out.append(f"{'':<22} alone: mean ratio of {f['alone_pairs']} pairs of short runs, 95% interval: "
                   + ", ".join(f"{n} {_alone_ratio(t):.3f} +- {t['alone_ratio_95']:.3f}"
                               for n, t in f["tenants"].items()))
        if f.get("repeats", 1) > 1:
            out.append(f"{'':<22} together: median of {f['repeats']} repeats, range {_spread(f['together_ratios'])}")
        extra = [f"{name} p99 {t['unmanaged_p99_ms']:.2f} ms unmanaged, {t['gpuslice_p99_ms']:.2f} under gpuslice"
                 for name, t in f["tenants"].items() if "gpuslice_p99_ms" in t]
        out.append(f"{'':<22} driver calls added per launch: {f['shared_calls_added']:.4f} shared, "
                   + ", ".join(f"{n} {t['alone_calls_added']:.4f} alone" for n, t in f["tenants"].items())
                   + ("; " + "; ".join(extra) if extra else ""))
    out += ["", "targets:"]
    for f in all_figures:
        together = _together_ratio(f)
        worst = min(f["tenants"].values(), key=_alone_ratio)
        worst_alone = _alone_ratio(worst)
        alone_calls = max(t["alone_calls_added"] for t in f["tenants"].values())
        checks = [(f"calls added per launch shared <= {SHARED_CALLS_AT_MOST}", f["shared_calls_added"],
                   f["shared_calls_added"] <= SHARED_CALLS_AT_MOST),
                  (f"calls added per launch alone <= {ALONE_CALLS_AT_MOST:g}", alone_calls,
                   alone_calls <= ALONE_CALLS_AT_MOST + 1e-4),
                  (f"together >= {TOGETHER_AT_LEAST} of unmanaged", together, together >= TOGETHER_AT_LEAST),
                  (f"alone >= {ALONE_AT_LEAST} of without gpuslice", worst_alone, worst_alone >= ALONE_AT_LEAST)]
        for what, value, met in checks:
            interval = f" +- {worst['alone_ratio_95']:.4f}" if what.startswith("alone >=") else ""
            out.append(f"  {f['shape']}: {what}: {'met' if met else 'NOT MET'} ({value:.4f}{interval})")
    return "\n".join(out)


def main(paths, args, report_dir):
    costs = args.costs
    all_figures = []
    short = {s.name: s for s in shapes(min(args.duration, ALONE_SECONDS))}
    for shape in shapes(args.duration):
        if args.shapes and shape.name not in args.shapes:
            continue
        if not args.quiet:
            print(f"launch-bound: {shape.name} ...", flush=True)
        all_figures.append(measure(paths, shape, costs, args.real_gpu, args.repeats, args.alone_pairs,
                                   short[shape.name]))
    report = text(all_figures, costs, args.real_gpu)
    print(report)
    folder = os.path.join(report_dir, "launch-bound")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "results.json"), "w") as f:
        json.dump({"costs": None if args.real_gpu else costs, "real_gpu": args.real_gpu, "duration_s": args.duration,
                   "repeats": args.repeats, "alone_pairs": args.alone_pairs,
                   "alone_duration_s": min(args.duration, ALONE_SECONDS), "shapes": all_figures}, f, indent=1)
    with open(os.path.join(folder, "summary.txt"), "w") as f:
        f.write(report + "\n")
    print(f"\nreport: {folder}/summary.txt")
    return 0
