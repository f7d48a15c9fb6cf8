"""A scenario across its modes: which runs to make, making them, and the results document.

Solo is one run per distinct tenant (tenants whose workloads are identical share one solo run:
alone on the GPU, a tenant's name and quota change nothing). Every other mode is one run of all
tenants together. A mode that cannot run here (MPS without a real GPU and its daemon) is reported
as skipped with the reason; a run that fails is reported as failed and the others still run.
"""
import dataclasses
import os
import time

from . import metrics, runner, targets


@dataclasses.dataclass
class Outcome:
    results: dict      # the results document (results.json)
    latencies: dict    # (mode, tenant) -> sorted latencies in µs, for the CDF
    failed: bool


def plan(scenario, modes, unavailable):
    """[(mode, tenants, what)] in run order, and {mode: reason} for those skipped."""
    runs, skipped = [], {}
    for mode in modes:
        if mode in unavailable:
            skipped[mode] = unavailable[mode]
        elif mode == "solo":
            groups = {}
            for t in scenario.tenants:
                groups.setdefault(t.signature(), []).append(t)
            for group in groups.values():
                runs.append(("solo", [group[0]], "solo (" + ", ".join(t.name for t in group) + ")"))
        else:
            runs.append((mode, list(scenario.tenants), mode))
    return runs, skipped


def _solo_figures(scenario, solo_records, ctx):
    """{tenant name: (its figures alone, its latencies alone)}, from its group's run."""
    by_rep = {r.tenants[0]: r for r in solo_records}
    tenant = {t.name: t for t in scenario.tenants}
    figures = {}
    for t in scenario.tenants:
        rep = next(name for name in by_rep if tenant[name].signature() == t.signature())
        record = by_rep[rep]
        as_rep = dataclasses.replace(t, name=rep)  # the run's processes carry the representative's name
        rows = metrics.timeline(record, [as_rep])
        fig = metrics.tenant_figures(record, as_rep, rows, ctx.gpu_memory)
        fig["np"] = 1.0 if ("kernels_per_s" in fig or "latency" in fig) else None
        if rep != t.name:
            fig["solo_run_shared_with"] = rep
        latencies = [us for p in record.processes if p.tenant == rep and p.kind in ("latency", "arrival")
                     for us in p.latencies_us]
        figures[t.name] = (fig, latencies)
    return figures


def run_scenario(scenario, modes, ctx, unavailable, header):
    """Runs every mode; returns an Outcome. `header` goes into the results document as is."""
    runs, skipped = plan(scenario, modes, unavailable)
    started = time.time()
    load_before = os.getloadavg()
    records, failures = {}, {}
    for i, (mode, tenants, what) in enumerate(runs):
        label = f"{scenario.name} · run {i + 1}/{len(runs)} · {what}"
        try:
            records.setdefault(mode, []).append(runner.run(scenario, mode, tenants, ctx, label))
        except runner.RunError as e:
            failures[mode] = str(e)
            ctx.progress.note(f"{scenario.name}: {what} failed: {e}")
    ctx.progress.done()

    results = dict(header)
    results.update({"scenario": scenario.to_json(),
                    "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
                    "elapsed_s": round(time.time() - started, 1),
                    "host": {"cpus": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before],
                             "load_average_after": [round(x, 2) for x in os.getloadavg()]},
                    "modes": {}})
    latencies, solo = {}, {}
    if "solo" in records and "solo" not in failures:
        for name, (fig, lat) in _solo_figures(scenario, records["solo"], ctx).items():
            solo[name] = fig
            if lat:
                latencies[("solo", name)] = lat
    for mode in modes:
        if mode in skipped:
            results["modes"][mode] = {"status": "skipped", "reason": skipped[mode]}
        elif mode in failures:
            results["modes"][mode] = {"status": "failed", "reason": failures[mode]}
        elif mode == "solo":
            results["modes"][mode] = {"status": "ran", "tenants": solo, "runs": len(records["solo"]),
                                      "wall_s": round(sum(r.wall_s for r in records["solo"]), 1)}
        else:
            record = records[mode][0]
            tenants = list(scenario.tenants)
            rows = metrics.timeline(record, tenants)
            figs = {t.name: metrics.compare_with_solo(metrics.tenant_figures(record, t, rows, ctx.gpu_memory),
                                                      solo.get(t.name))
                    for t in tenants}
            for p in record.processes:
                if p.kind in ("latency", "arrival"):
                    latencies.setdefault((mode, p.tenant), []).extend(p.latencies_us)
            results["modes"][mode] = {"status": "ran", "tenants": figs,
                                      "run": metrics.run_figures(mode, figs, rows, mode in metrics.ENFORCING_MODES),
                                      "timeline": metrics.timeline_json(rows, tenants, metrics.steady_end(record)),
                                      "events": record.events, "wall_s": round(record.wall_s, 1)}
            if mode == "gpuslice":
                results["modes"][mode]["scheduler"] = metrics.scheduler_figures(record)
    for values in latencies.values():
        values.sort()
    # Evaluated from the results document alone; a missed target is reported, never a failure.
    results["targets"] = targets.evaluate(scenario.targets, results)
    violations = sum((m.get("run") or {}).get("quota_violations") or 0 for m in results["modes"].values())
    return Outcome(results=results, latencies=latencies, failed=bool(failures) or violations > 0)
