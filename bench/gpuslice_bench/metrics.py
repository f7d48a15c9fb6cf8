"""The figures of /work/shared/REFERENCE.md §5, from the runs' raw records.

Per tenant and mode:
  NP          normalised progress T_solo / T_shared: for compute tenants kernels/s shared ÷
              solo, counted in blocks (kernels/s × blocks per kernel: a wide kernel on a MIG
              instance has fewer); for latency tenants mean request latency solo ÷ shared (the time one request
              takes is its turnaround). Memory-only tenants make no progress to normalise.
  share       the tenant's device busy time ÷ wall time, over the steady windows (below);
  entitled    the share water-filling promises it (entitlement.py), over the same windows;
  latency     p50/p99/p99.9 over every request of all its processes, and ÷ solo (inflation);
  refused     allocations the driver (or gpuslice) refused.
Per mode: STP = ΣNP, ANTT = mean(1/NP), Jain's index (Σx)²/(nΣx²) over x = NP ÷ entitled NP
(entitled NP = entitled share ÷ demand, at most 1), the worst |share − entitled| in any steady
window, device utilisation, and quota violations: samples in which a tenant's processes held
more device memory than its quota (counted in the modes that enforce quotas).

A window is the time between two samples; it is steady when no process started or finished in
it and it ends before the first tenant stops computing. Only steady windows count, so that
start-up and wind-down are not mistaken for unfairness.
"""
import math

from .entitlement import water_fill, workload_demand

ENFORCING_MODES = ("gpuslice", "mps")


def nearest_rank(sorted_values, q):
    """The workload's percentile rule: always an observed value; p99.9 of < 1000 is the maximum."""
    rank = math.ceil(q * len(sorted_values) - 1e-9)
    return sorted_values[min(max(rank, 1), len(sorted_values)) - 1]


def _tenant_memory(sample, pids):
    return sum(sample.procs.get(pid, (0, 0))[1] for pid in pids)


def steady_end(record):
    """The steady state ends when the first tenant stops computing (memory holders end with it);
    a process a scenario's event killed ends early on purpose and does not end it. A planned fault
    (`fault_at`) does: what follows it differs by mode (under MPS every client's context breaks),
    so every mode's shares are taken over the same part of the run, before it."""
    workers = [p for p in record.processes if p.kind != "memory" and not p.killed] or \
        [p for p in record.processes if not p.killed] or record.processes
    return min(p.finished_at for p in workers)


def timeline(record, tenants):
    """One row per window: per tenant busy share, demand and entitlement; device utilisation."""
    pids = {t.name: [p.pid for p in record.processes if p.tenant == t.name] for t in tenants}
    events = [e for p in record.processes for e in (p.ready_at, p.finished_at) if e is not None]
    end = steady_end(record)
    rows = []
    for a, b in zip(record.samples, record.samples[1:]):
        dt = b.t - a.t
        if dt <= 0:
            continue
        demand = {}
        for t in tenants:
            running = [p for p in record.processes if p.tenant == t.name and p.ready_at is not None
                       and p.ready_at <= a.t and p.finished_at >= b.t]
            demand[t.name] = min(1.0, sum(workload_demand(p.workload) for p in running))
        entitled = water_fill({t.name: t.weight for t in tenants},
                              {t.name: min(demand[t.name], t.cap) for t in tenants})
        share = {}
        for t in tenants:
            busy = sum(b.procs.get(pid, (0, 0))[0] - a.procs.get(pid, (0, 0))[0] for pid in pids[t.name])
            share[t.name] = busy / 1e9 / dt
        steady = b.t <= end and not any(a.t < e < b.t for e in events)
        # A window that runs past the first tenant's end is partly after the workloads stopped: its
        # shares fall towards 0 for lack of demand, not of service (the chart leaves it out).
        rows.append({"t0": a.t, "t1": b.t, "dt": dt, "steady": steady, "past_end": b.t > end,
                     "share": share, "demand": demand, "entitled": entitled,
                     "utilisation": (b.device_busy_ns - a.device_busy_ns) / 1e9 / dt})
    return rows


def _counted(rows):
    steady = [r for r in rows if r["steady"]]
    return steady or rows


def _weighted_mean(rows, pick):
    total = sum(r["dt"] for r in rows)
    return sum(pick(r) * r["dt"] for r in rows) / total if total > 0 else None


def latency_summary(latencies_us):
    if not latencies_us:
        return None
    s = sorted(latencies_us)
    return {"requests": len(s), "mean_us": sum(s) / len(s), "p50_us": nearest_rank(s, 0.50),
            "p99_us": nearest_rank(s, 0.99), "p999_us": nearest_rank(s, 0.999), "max_us": s[-1]}


def tenant_figures(record, tenant, rows, gpu_memory):
    """Everything measured about `tenant` in one run (no comparison with solo yet)."""
    procs = [p for p in record.processes if p.tenant == tenant.name]
    fig = {"processes": len(procs)}
    # A process killed by a scenario's event printed no result: it counts for busy time only.
    compute = [p for p in procs if p.kind == "compute" and p.result]
    if compute:
        fig["kernels_per_s"] = sum(p.result["kernels_per_s"] for p in compute)
        # Work: a wide kernel's blocks depend on the SMs its device (or MIG instance) has.
        fig["blocks_per_s"] = sum(p.result["kernels_per_s"] * p.result.get("blocks", 1) for p in compute)
        fig["busy_fraction_reported"] = sum(p.result["busy_fraction"] for p in compute)
    faulted = [p.faulted for p in procs if p.faulted]
    if faulted:
        fig["ended_by_own_fault"] = faulted.count("own")
        fig["ended_by_others_fault"] = faulted.count("other")
    latency = [p for p in procs if p.kind == "latency" and p.result]
    if latency:
        merged = [us for p in latency for us in p.latencies_us]
        fig["latency"] = latency_summary(merged)
        fig["requests_per_s"] = sum(p.result["requests"] / max(p.result["elapsed_s"], 1e-9) for p in latency)
        fig["missed_periods"] = sum(p.result["missed_periods"] for p in latency)
        slos = {p.workload.params.get("slo_ms") for p in latency} - {None}
        if slos and merged:
            slo_us = min(slos) * 1000
            fig["slo_ms"] = min(slos)
            fig["slo_attainment"] = sum(1 for us in merged if us <= slo_us) / len(merged)
    arrivals = [p for p in procs if p.kind == "arrival" and p.result]
    if arrivals:
        # Each arrival's time from its first launch to that kernel's end is its latency.
        fig["latency"] = latency_summary([us for p in arrivals for us in p.latencies_us])
        fig["requests_per_s"] = sum(p.result["arrivals"] / max(p.result["elapsed_s"], 1e-9) for p in arrivals)
    memory = [p for p in procs if p.kind == "memory" and p.result]
    if memory:
        refusals = {}
        for p in memory:
            for name, n in p.result.get("refusals", {}).items():
                refusals[name] = refusals.get(name, 0) + n
        fig["allocations"] = {"asked": sum(p.result["count"] for p in memory),
                              "granted": sum(p.result["allocated"] for p in memory),
                              "refused": sum(p.result["refused"] for p in memory), "refusals": refusals,
                              "bytes_obtained": sum(p.result["bytes_obtained"] for p in memory),
                              "asked_bytes": sum(p.result["count"] * p.result["chunk_bytes"] for p in memory)}
    counted = _counted(rows)
    if counted:
        fig["share"] = _weighted_mean(counted, lambda r: r["share"][tenant.name])
        fig["entitled"] = _weighted_mean(counted, lambda r: r["entitled"][tenant.name])
        fig["demand"] = _weighted_mean(counted, lambda r: r["demand"][tenant.name])
        fig["worst_share_error"] = max(abs(r["share"][tenant.name] - r["entitled"][tenant.name]) for r in counted)
    pids = [p.pid for p in procs]
    held = [_tenant_memory(s, pids) for s in record.samples]
    fig["peak_memory"] = max(held, default=0)
    quota = tenant.quota_bytes(gpu_memory)
    fig["memory_quota"] = quota
    if quota is not None:
        over = [h for h in held if h > quota]
        fig["samples_over_quota"] = len(over)
        fig["worst_over_quota"] = max(over, default=quota) - quota
    return fig


def compare_with_solo(fig, solo):
    """Adds NP and latency inflation; `solo` is the same tenant's figures alone (or None)."""
    fig["np"] = None
    if solo is None:
        return fig
    if "kernels_per_s" in fig and solo.get("kernels_per_s"):
        # In work done (blocks), so that a wide kernel on a MIG instance, one wave of fewer
        # blocks, counts for the part of the GPU it used; for narrow kernels that is kernels/s.
        both = fig.get("blocks_per_s") and solo.get("blocks_per_s")
        fig["np"] = fig["blocks_per_s"] / solo["blocks_per_s"] if both else fig["kernels_per_s"] / solo["kernels_per_s"]
    elif fig.get("latency") and solo.get("latency"):
        fig["np"] = solo["latency"]["mean_us"] / fig["latency"]["mean_us"]
        fig["latency_inflation"] = {k: fig["latency"][k] / solo["latency"][k] for k in ("p50_us", "p99_us", "p999_us")}
    if fig["np"] is not None and fig.get("demand"):
        fig["entitled_np"] = min(1.0, fig["entitled"] / fig["demand"])
    return fig


def run_figures(mode, tenant_figs, rows, enforcing):
    """The per-run figures over tenants' NP and the timeline."""
    nps = [f["np"] for f in tenant_figs.values() if f.get("np")]
    xs = [f["np"] / f["entitled_np"] for f in tenant_figs.values() if f.get("np") and f.get("entitled_np")]
    counted = _counted(rows)
    run = {"stp": sum(nps) if nps else None,
           "antt": sum(1 / n for n in nps) / len(nps) if nps else None,
           "jain": sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if xs else None,
           "worst_share_error": max((f["worst_share_error"] for f in tenant_figs.values()
                                     if f.get("worst_share_error") is not None), default=None),
           "gpu_utilisation": _weighted_mean(counted, lambda r: r["utilisation"]) if counted else None,
           "refused_allocations": sum(f.get("allocations", {}).get("refused", 0) for f in tenant_figs.values()),
           "windows": len(rows), "steady_windows": sum(1 for r in rows if r["steady"])}
    over = sum(f.get("samples_over_quota", 0) for f in tenant_figs.values())
    run["quota_violations"] = over if enforcing else None
    run["samples_over_quota_unenforced"] = None if enforcing else over
    return run


def timeline_json(rows, tenants, end=None):
    return {"t": [round((r["t0"] + r["t1"]) / 2, 3) for r in rows], "steady": [r["steady"] for r in rows],
            "past_end": [r["past_end"] for r in rows],
            "t0": [round(r["t0"], 4) for r in rows], "t1": [round(r["t1"], 4) for r in rows],
            "end_s": None if end is None else round(end, 4),
            "utilisation": [round(r["utilisation"], 4) for r in rows],
            "share": {t.name: [round(r["share"][t.name], 4) for r in rows] for t in tenants},
            "entitled": {t.name: [round(r["entitled"][t.name], 4) for r in rows] for t in tenants}}


def scheduler_figures(record):
    """gpuslice runs: the scheduler's account of the device's time over the run, summed over the
    GPUs, as fractions of the run's wall time (the steady windows and the ramps alike): from a
    grant's start to its holder's first launch (the hand-over's own cost), the rest of the time
    holders had nothing in flight, nobody holding the GPU while tenants over their limits waited,
    and the drains (gate closed to hand-over; the device still runs the holder's queue, so not a
    loss by itself). None where it could not be read."""
    if not record.scheduler or not record.duration:
        return None
    wall_ns = record.duration * 1e9
    total = lambda key: sum(g["grant_time_ns"].get(key, 0) for g in record.scheduler)
    return {"grants": sum(g["grants"] for g in record.scheduler),
            "grant_start_idle": total("grant_start_idle") / wall_ns,
            "holder_idle": total("holder_idle") / wall_ns,
            "unheld_waiting": total("unheld_waiting") / wall_ns,
            "drain": total("drain") / wall_ns}

