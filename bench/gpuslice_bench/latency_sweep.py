"""gpuslice-bench latency-sweep: the latency class on tenant shapes nobody tuned it on.

Each run draws pairs at random (a fresh seed each run, printed; --seed repeats one): a service of
class `latency` beside a co-runner, and runs each pair three ways — the service alone, the pair
unmanaged, the pair under gpuslice. The class's contract (docs/scheduling.md) is judged on each:
the service's p99 at most min(unmanaged p99, alone p99 + the co-runner's kernel + 1 ms), never
above 1.1 x unmanaged, and the co-runner keeping at least 90% of its unmanaged device time, capped
at its limit when it has one (a limit is a ceiling gpuslice must enforce) and at what the service
leaves of the device (1 - its kernels x length / period): the service is drawn within its
request, which the class is owed first (contract, point 1), so what the co-runner took of it
unmanaged is not the co-runner's to keep. The count capped at the limit only is printed beside it.

The tail judged is the steady state's: each run's first WARMUP_S seconds of requests are run but
not recorded (in all three runs alike), and their worst is reported apart as the arrival. The
processes start together, and a co-runner that launched before gpuslice saw the service queued
what it liked, as a tenant alone may: beside the service that backlog drains once, and in a run
of a few seconds it would be the p99. The longest backlog the generator draws (3 processes x 16
kernels x 8 ms, 0.38 s of work) runs beside a service of at most 40% of the device within 0.64 s.

The service is drawn within its request (what it asks of the device, kernels x length / period,
at most 90% of its request): over its request a `latency` tenant is a `standard` one by
contract, and nothing is promised of its tail.
"""
import dataclasses
import json
import os
import random

from . import tenant_runs
from .tenant_runs import Tenant

PAIRS = 40
PAIRS_MEETING_AT_LEAST = 38
P99_OVER_UNMANAGED_AT_MOST = 1.1
CORUNNER_TIME_AT_LEAST = 0.90
SLACK_MS = 1.0
# The requests of each run's first second are the arrival, not the steady state (above).
WARMUP_S = 1.0


@dataclasses.dataclass
class Pair:
    index: int
    service_kernel_us: int
    service_kernels: int
    service_period_ms: float
    service_request: int
    corunner_kernel_us: int
    corunner_depth: int
    corunner_processes: int
    corunner_class: str   # standard or background
    corunner_limit: int   # 0: none
    # A chain: each kernel of a request launched once the one before has ended and the host has
    # spent service_host_gap_us (a decode loop). -1: the request's kernels launched at once.
    service_host_gap_us: int = -1

    def service_demand(self):
        """The fraction of the device the service's kernels take: kernels x length / period."""
        return self.service_kernels * self.service_kernel_us / 1000 / self.service_period_ms

    def describe(self):
        limit = f", limit {self.corunner_limit}" if self.corunner_limit else ""
        chain = f", chained {self.service_host_gap_us} us apart" if self.service_host_gap_us >= 0 else ""
        return (f"service {self.service_kernels}x{self.service_kernel_us / 1000:g} ms{chain} every "
                f"{self.service_period_ms:g} ms (request {self.service_request}) beside {self.corunner_processes}x "
                f"{self.corunner_class} {self.corunner_kernel_us / 1000:g} ms kernels, {self.corunner_depth} in flight"
                f"{limit}")


# A third of the services of several kernels are chains, with the host's turn between two of
# their kernels drawn up to this (a request's own gaps, which the latency class's grace bridges).
CHAINED_SHARE = 1 / 3
HOST_GAP_US_AT_MOST = 250


def draw_pairs(seed, count):
    rng = random.Random(seed)
    # Drawn apart, so that a seed's pairs are those it drew before chains were drawn, some chained.
    chains = random.Random(f"{seed}:chains")
    pairs = []
    for i in range(count):
        kernel_us = rng.randint(100, 2000)
        kernels = rng.randint(1, 4)
        request = rng.randint(10, 40)
        period_ms = rng.uniform(2, 50)
        # Within its request: what it asks of the device at most 90% of what it is entitled to.
        period_ms = max(period_ms, kernels * kernel_us / 1000 / (0.9 * request / 100))
        corunner_class = rng.choice(["standard", "background"])
        limited = rng.random() < 0.5 and corunner_class == "standard"
        pairs.append(Pair(index=i, service_kernel_us=kernel_us, service_kernels=kernels,
                          service_period_ms=round(period_ms, 2), service_request=request,
                          corunner_kernel_us=rng.randint(500, 8000), corunner_depth=rng.randint(1, 16),
                          corunner_processes=rng.randint(1, 3), corunner_class=corunner_class,
                          corunner_limit=rng.randint(50, 90) if limited else 0))
        chained = chains.random() < CHAINED_SHARE
        if kernels > 1 and chained:
            pairs[-1].service_host_gap_us = chains.randint(0, HOST_GAP_US_AT_MOST)
    return pairs


def tenants(pair, seconds, warmup=WARMUP_S):
    """The service records `seconds` of requests after `warmup` seconds; the co-runner runs as long."""
    chain = ["--dependent", "--host-gap-us", str(pair.service_host_gap_us)] if pair.service_host_gap_us >= 0 else []
    service = Tenant("service", ["latency", "--period-ms", f"{pair.service_period_ms:g}", "--kernels-per-request",
                                 str(pair.service_kernels), "--kernel-us", str(pair.service_kernel_us)] + chain +
                     ["--warmup-s", f"{warmup:g}", "--duration", f"{seconds:g}"], request=pair.service_request,
                     compute_class="latency")
    corunner = Tenant("corunner", ["compute", "--kernel-us", str(pair.corunner_kernel_us), "--depth",
                                   str(pair.corunner_depth), "--duration", f"{warmup + seconds:g}"],
                      request=min(100 - pair.service_request, pair.corunner_limit or 100), limit=pair.corunner_limit,
                      compute_class=pair.corunner_class if pair.corunner_class != "standard" else "",
                      processes=pair.corunner_processes)
    return service, corunner


def _corunner_time(run):
    """The co-runner's device time as a fraction of the run (its processes' busy fractions added)."""
    return sum(r["busy_fraction"] for r in run.results["corunner"])


def entitled_time(corunner_unmanaged, limit_pct, service_demand):
    """What the co-runner may keep: its unmanaged device time, at most its limit and at most what
    the service, owed its request first, leaves of the device."""
    entitled = min(corunner_unmanaged, 1.0 - service_demand)
    return min(entitled, limit_pct / 100) if limit_pct else entitled


def seconds_for(pair, seconds):
    """At least `seconds`, and long enough for some 250 requests (a p99 that is not the worst one
    or two), at most twice `seconds`."""
    return min(max(seconds, 250 * pair.service_period_ms / 1000), 2 * seconds)


def kernel_log_path(folder, seed, pair, mode):
    """Where `measure` logs a run's kernels when asked to (`mode`: alone, unmanaged or gpuslice)."""
    return os.path.join(folder, f"kernels-{seed}-{pair.index}-{mode}.jsonl") if folder else None


def measure(paths, pair, seconds, costs="default", warmup=WARMUP_S, kernel_log_dir=None, seed=None):
    """The pair alone, unmanaged and under gpuslice, the simulated driver charging `costs` per call
    (GPUSLICE_SIM_CALL_COSTS) in all three; with `kernel_log_dir`, each run's kernels logged there
    (GPUSLICE_SIM_KERNEL_LOG, one file per run: kernel_log_path)."""
    service, corunner = tenants(pair, seconds_for(pair, seconds), warmup)
    log = {mode: kernel_log_path(kernel_log_dir, seed, pair, mode) for mode in ("alone", "unmanaged", "gpuslice")}
    alone = tenant_runs.run(paths, [service], managed=False, costs=costs, kernel_log=log["alone"])
    unmanaged = tenant_runs.run(paths, [service, corunner], managed=False, costs=costs, kernel_log=log["unmanaged"])
    managed = tenant_runs.run(paths, [service, corunner], managed=True, costs=costs, kernel_log=log["gpuslice"])
    p99 = {mode: run.results["service"][0]["p99_us"] / 1000 for mode, run in
           (("alone", alone), ("unmanaged", unmanaged), ("gpuslice", managed))}
    arrival = {mode: run.results["service"][0]["warmup_max_us"] / 1000 for mode, run in
               (("alone", alone), ("unmanaged", unmanaged), ("gpuslice", managed))}
    bound = min(p99["unmanaged"], p99["alone"] + pair.corunner_kernel_us / 1000 + SLACK_MS)
    corunner_unmanaged = _corunner_time(unmanaged)
    entitled = entitled_time(corunner_unmanaged, pair.corunner_limit, pair.service_demand())
    corunner_gpuslice = _corunner_time(managed)
    return {
        "pair": dataclasses.asdict(pair),
        "description": pair.describe(),
        "p99_ms": p99,
        "arrival_max_ms": arrival,
        "bound_ms": bound,
        "latency_met": p99["gpuslice"] <= bound,
        "over_unmanaged": p99["gpuslice"] / p99["unmanaged"] if p99["unmanaged"] else 0.0,
        "service_demand": pair.service_demand(),
        "corunner_time": {"unmanaged": corunner_unmanaged, "gpuslice": corunner_gpuslice, "entitled": entitled},
        "corunner_met": corunner_gpuslice >= CORUNNER_TIME_AT_LEAST * entitled,
        "corunner_met_limit_cap_only": corunner_gpuslice >= CORUNNER_TIME_AT_LEAST * entitled_time(
            corunner_unmanaged, pair.corunner_limit, 0.0),
    }


def summary(figures, seed, costs="default", warmup=WARMUP_S):
    latency = sum(f["latency_met"] for f in figures)
    # The arrival is reported, not judged: no contract bounds a backlog queued before gpuslice saw
    # the service (docs/scheduling.md, point 3).
    arrival_below = sum(f["arrival_max_ms"]["gpuslice"] <= f["arrival_max_ms"]["unmanaged"] for f in figures)
    corunner = sum(f["corunner_met"] for f in figures)
    corunner_limit_cap_only = sum(f["corunner_met_limit_cap_only"] for f in figures)
    worst = max((f["over_unmanaged"] for f in figures), default=0.0)
    n = len(figures)
    need = n - (PAIRS - PAIRS_MEETING_AT_LEAST) if n >= PAIRS else n * PAIRS_MEETING_AT_LEAST / PAIRS
    return {
        "seed": seed, "costs": costs, "warmup_s": warmup, "pairs": n, "arrival_at_most_unmanaged": arrival_below,
        "latency_met": latency, "corunner_met": corunner, "corunner_met_limit_cap_only": corunner_limit_cap_only,
        "worst_over_unmanaged": worst,
        "targets": [
            (f"service p99 <= min(unmanaged, alone + co-runner kernel + {SLACK_MS:g} ms) in >= {need:g} of {n}",
             latency >= need, f"{latency} of {n}"),
            (f"service p99 never above {P99_OVER_UNMANAGED_AT_MOST} x unmanaged", worst <= P99_OVER_UNMANAGED_AT_MOST,
             f"worst {worst:.2f} x"),
            (f"co-runner keeps >= {CORUNNER_TIME_AT_LEAST:.0%} of its unmanaged device time (capped at its limit and "
             f"at what the service leaves) "
             f"in >= {need:g} of {n}", corunner >= need, f"{corunner} of {n}"),
        ],
    }


def text(figures, result):
    out = [f"latency-sweep, seed {result['seed']} (rerun: --seed {result['seed']}), {result['pairs']} pairs, "
           f"simulated GPU, call costs {result['costs']}, p99 after a warm-up of {result['warmup_s']:g} s", ""]
    out.append(f"{'#':>3} {'alone':>7} {'unman.':>7} {'gpuslice':>9} {'bound':>7} {'x unman.':>8} "
               f"{'co-runner unman./gs/entitled':>29} {'arrival unman./gs':>17}  pair")
    for f in figures:
        c = f["corunner_time"]
        flags = ("" if f["latency_met"] else " LATENCY") + ("" if f["corunner_met"] else " CO-RUNNER")
        out.append(f"{f['pair']['index']:>3} {f['p99_ms']['alone']:>7.2f} {f['p99_ms']['unmanaged']:>7.2f} "
                   f"{f['p99_ms']['gpuslice']:>9.2f} {f['bound_ms']:>7.2f} {f['over_unmanaged']:>8.2f} "
                   f"{c['unmanaged']:>9.3f} {c['gpuslice']:>9.3f} {c['entitled']:>9.3f} "
                   f"{f['arrival_max_ms']['unmanaged']:>8.2f} {f['arrival_max_ms']['gpuslice']:>8.2f}  "
                   f"{f['description']}{flags}")
    out += ["", "targets (p99 in ms; co-runner: fraction of the device):"]
    for what, met, value in result["targets"]:
        out.append(f"  {what}: {'met' if met else 'NOT MET'} ({value})")
    out.append(f"co-runner keeps >= {CORUNNER_TIME_AT_LEAST:.0%} of its unmanaged device time capped at its limit "
               f"only, not at what the service leaves (not judged): {result['corunner_met_limit_cap_only']} of "
               f"{result['pairs']}")
    out.append(f"arrival (the worst request of the warm-up, not judged): gpuslice at most unmanaged in "
               f"{result['arrival_at_most_unmanaged']} of {result['pairs']}")
    return "\n".join(out)


def main(paths, args, report_dir):
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    if not args.quiet:  # first, so that a run cut short can be rerun
        print(f"latency-sweep: seed {seed} (rerun: --seed {seed})", flush=True)
    figures = []
    for pair in draw_pairs(seed, args.pairs):
        if args.only and pair.index not in args.only:
            continue
        if not args.quiet:
            print(f"latency-sweep: pair #{pair.index} ({pair.index + 1} of {args.pairs}): {pair.describe()}", flush=True)
        kernel_log = getattr(args, "kernel_log", None)
        if kernel_log:
            os.makedirs(kernel_log, exist_ok=True)
            for mode in ("alone", "unmanaged", "gpuslice"):  # appended to by the run: start empty
                path = kernel_log_path(kernel_log, seed, pair, mode)
                if os.path.exists(path):
                    os.unlink(path)
        figures.append(measure(paths, pair, args.duration, args.costs, args.warmup, kernel_log, seed))
    result = summary(figures, seed, args.costs, args.warmup)
    report = text(figures, result)
    print(report)
    folder = os.path.join(report_dir, "latency-sweep")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"results-{seed}.json"), "w") as f:
        json.dump({"seed": seed, "costs": args.costs, "duration_s": args.duration, "warmup_s": args.warmup,
                   "pairs": figures,
                   "summary": {k: v for k, v in result.items() if k != "targets"},
                   "targets": [{"target": w, "met": m, "value": v} for w, m, v in result["targets"]]}, f, indent=1)
    with open(os.path.join(folder, f"summary-{seed}.txt"), "w") as f:
        f.write(report + "\n")
    print(f"\nreport: {folder}/summary-{seed}.txt")
    return 0
