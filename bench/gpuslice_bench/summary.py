"""summary.md: one scenario's report in Markdown: what ran, on what, the tables and the charts."""
import os

from . import table
from .overhead import markdown as overhead_markdown
from .quantities import format_bytes
from .targets import markdown as targets_markdown

CHART_CAPTIONS = {
    "share": "Each tenant's share of the GPU's time per {interval:g} s window (solid) against what it is "
             "entitled to (dashed); grey dots: the GPU's total busy time.",
    "modes": "The modes side by side: each tenant's share of the GPU's SM-time over the steady windows, and "
             "the SM-time no tenant used (idle; under MIG also the SMs stranded in an instance whose tenant "
             "does not use them, or outside every instance).",
    "latency-cdf": "Request latency distribution of the latency-sensitive tenants: left all requests, right "
                   "the tail from the 90th percentile (dotted line: p99). Further left is faster.",
}


def _workload_text(w):
    if w["kind"] == "compute":
        text = f"compute: {w['kernel_us']} µs kernels, {w['depth']} in flight"
    elif w["kind"] == "latency":
        text = (f"latency: a request every {w['period_ms']:g} ms of {w['kernels_per_request']} × "
                f"{w['kernel_us']} µs kernels")
        if w.get("slo_ms"):
            text += f" (SLO {w['slo_ms']:g} ms)"
    elif w["kind"] == "arrival":
        text = (f"arrival: {w['count']} processes one after another, one {w['kernel_us']} µs kernel each"
                + (", each a new tenant" if w.get("new_tenant") else ""))
    else:
        text = f"memory: {w['count']} × {w['chunk']} ({w['api']})"
        if w.get("hold") is not None:
            text += f", held {w['hold']:g} s"
    if w["processes"] > 1:
        text += f", {w['processes']} processes"
    if w["start"]:
        text += f", from {w['start']:g} s"
    return text


def _tenants_table(results):
    rows = []
    for t in results["scenario"]["tenants"]:
        request = t["request"] if t["request"] is not None else "10 (default)"
        limit = t["limit"] if t["limit"] is not None else 100
        rows.append([t["name"], "; ".join(_workload_text(w) for w in t["workloads"]),
                     t["memory_quota"] or "none", f"{request}% / {limit}%", t.get("class") or "standard (default)"])
    header = ["tenant", "workload", "memory quota", "compute request / limit", "class"]
    layout = {item["tenant"]: item["profile"] for item in results["scenario"].get("mig_layout") or []}
    if layout:  # mode mig: the instance each tenant ran in
        header.append("MIG instance")
        rows = [row + [layout.get(row[0], "-")] for row in rows]
    table_text = table.markdown(header, rows)
    events = results["scenario"].get("events") or []
    if events:
        table_text += "\n\nEvents (every mode but solo): " + "; ".join(
            f"at {e['at']:g} s SIG{e['signal']} to " + (f"{e['processes']} of " if e.get("processes") else "") +
            f"{e['tenant']}" + (f"'s workload {e['workload']}" if e.get("workload") is not None else "")
            for e in events) + "."
    return table_text


def _over_quota(fig, mode):
    over = fig.get("samples_over_quota")
    if over is None:
        return "-"
    return str(over) if mode in ("gpuslice", "mps") else f"{over} (not enforced)"


def _memory_table(results):
    rows = []
    for t in results["scenario"]["tenants"]:
        for mode, r in results["modes"].items():
            if r["status"] != "ran":
                continue
            f = r["tenants"][t["name"]]
            a = f.get("allocations")
            if a is None and not f.get("peak_memory"):
                continue
            quota = f.get("memory_quota")
            rows.append([t["name"], mode, f"{a['granted']}/{a['asked']}" if a else "-",
                         ", ".join(f"{k} × {v}" for k, v in a["refusals"].items()) if a and a["refusals"] else "-",
                         format_bytes(f["peak_memory"]), format_bytes(quota) if quota else "none",
                         _over_quota(f, mode)])
    if not rows:
        return None
    return table.markdown(["tenant", "mode", "allocations granted", "refused with", "peak device memory", "quota",
                           "samples over quota"], rows)


def _latency_table(results):
    rows = []
    for t in results["scenario"]["tenants"]:
        for mode, r in results["modes"].items():
            if r["status"] != "ran":
                continue
            f = r["tenants"][t["name"]]
            lat = f.get("latency")
            if not lat:
                continue
            inflation = f.get("latency_inflation") or {}
            slo = f"{100 * f['slo_attainment']:.1f}% ≤ {f['slo_ms']:g} ms" if "slo_attainment" in f else "-"
            rows.append([t["name"], mode, f"{f['requests_per_s']:.0f}", table.ms(lat["p50_us"]), table.ms(lat["p99_us"]),
                         table.ms(lat["p999_us"]), table.times(inflation.get("p50_us")),
                         table.times(inflation.get("p99_us")), table.times(inflation.get("p999_us")), slo,
                         str(f.get("missed_periods", 0))])
    if not rows:
        return None
    return table.markdown(["tenant", "mode", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "p50 vs solo", "p99 vs solo",
                           "p99.9 vs solo", "SLO attainment", "missed periods"], rows)


def _faults_table(results):
    rows = []
    for t in results["scenario"]["tenants"]:
        for mode, r in results["modes"].items():
            f = r.get("tenants", {}).get(t["name"]) if r["status"] == "ran" else None
            if f and ("ended_by_own_fault" in f or "ended_by_others_fault" in f):
                rows.append([t["name"], mode, str(f.get("ended_by_own_fault", 0)), str(f.get("ended_by_others_fault", 0))])
    if not rows:
        return None
    return table.markdown(["tenant", "mode", "processes its own fault ended", "processes another tenant's fault ended"],
                          rows)


def write(folder, results, charts, overhead=None):
    s = results["scenario"]
    host = results["host"]
    lines = [f"# {s['name']}", "", s["description"], "",
             f"- **GPU:** {results['platform']['description']}",
             f"- **Duration:** {s['duration_s']:g} s per mode (scale {results['scale']:g} of the scenario's "
             f"{s['duration_s'] / results['scale']:g} s), sampled every {s['sample_interval_s']:g} s",
             f"- **Machine:** {host['cpus']} CPUs, load average {host['load_average_before'][0]:.2f} before and "
             f"{host['load_average_after'][0]:.2f} after ({results['elapsed_s']:g} s in all)",
             f"- **Command:** `{results['command']}`",
             f"- **Scenario file:** `{s['path']}`; full figures in `results.json`", "",
             "## Tenants", "", _tenants_table(results), "",
             "## Per tenant", "",
             "GPU share and entitled: fraction of the GPU's time over the steady windows. NP: progress "
             "relative to running alone (compute: kernels/s; latency: mean request time). p99 vs solo: the "
             "tail latency's inflation over running alone.", "",
             table.markdown(table.TENANT_HEADER, table.tenant_rows(results), drop_empty=True), "",
             "## Per mode", "",
             "STP = ΣNP; ANTT = mean(1/NP); Jain's index over NP ÷ entitled NP (1 = every tenant got the "
             "same fraction of what it is entitled to); worst share error: the largest |share − entitled| of "
             "any tenant in any steady window; quota violations: samples in which a tenant held more device "
             "memory than its quota (must be 0 where quotas are enforced).", "",
             table.markdown(table.RUN_HEADER, table.run_rows(results)), ""]
    if results.get("targets"):
        met = sum(1 for e in results["targets"] if e["met"])
        lines += ["## Targets", "", f"{met} of {len(results['targets'])} met. Each target is carried by the scenario "
                  "file and evaluated from `results.json`; a missed target does not change the exit status.", "",
                  targets_markdown(results["targets"]), ""]
    latency = _latency_table(results)
    if latency:
        lines += ["## Latency", "", "Every request of the tenant's processes; a missed period is a period boundary that "
                  "passed while a request still ran (no request is sent for it).", "", latency, ""]
    faults = _faults_table(results)
    if faults:
        lines += ["## Faults", "", "A process that launched its planned faulting kernel (`fault_at`), and every other "
                  "process that ended with `CUDA_ERROR_ILLEGAL_ADDRESS` after it: the fault reached it.", "", faults, ""]
    memory = _memory_table(results)
    if memory:
        lines += ["## Memory", "", memory, ""]
    if charts:
        lines += ["## Charts", ""]
        for chart in charts:
            kind = "latency-cdf" if chart.startswith("latency-cdf") else "modes" if chart == "modes.svg" else "share"
            lines += [f"![{chart}]({chart})", "", CHART_CAPTIONS[kind].format(interval=s["sample_interval_s"]), ""]
    skipped = [(m, r["reason"]) for m, r in results["modes"].items() if r["status"] != "ran"]
    if skipped:
        lines += ["## Not measured", ""] + [f"- **{m}**: {reason.splitlines()[0]}" for m, reason in skipped] + [""]
    if overhead:
        lines += ["## Per-call overhead of the shim", "", overhead_markdown(overhead), ""]
    path = os.path.join(folder, "summary.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path
