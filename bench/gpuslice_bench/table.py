"""The tables: per tenant and mode (who got what), per mode (how the GPU was shared).

Plain text for stdout and Markdown for the summary come from the same rows.
"""


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def num(x, digits=2):
    return "-" if x is None else f"{x:.{digits}f}"


def ms(us):
    return "-" if us is None else f"{us / 1000:.2f}"


def times(x):
    return "-" if x is None else f"{x:.2f}x"


def throughput(fig):
    if "kernels_per_s" in fig:
        return f"{fig['kernels_per_s']:.0f} kernels/s"
    if "requests_per_s" in fig:
        return f"{fig['requests_per_s']:.0f} req/s"
    if "allocations" in fig:
        return f"{fig['allocations']['granted']}/{fig['allocations']['asked']} allocs"
    return "-"


def _latency(fig, key):
    lat = fig.get("latency")
    return lat[key] if lat else None


def _refused(fig):
    a = fig.get("allocations")
    return "-" if a is None else str(a["refused"])


def _ran(results):
    return [(m, r) for m, r in results["modes"].items() if r["status"] == "ran"]


TENANT_HEADER = ["tenant", "mode", "GPU share", "entitled", "NP", "throughput", "p50 ms", "p99 ms", "p99 vs solo",
                 "refused allocs"]
RUN_HEADER = ["mode", "STP", "ANTT", "Jain", "worst share error", "GPU busy", "busy / unmanaged", "quota violations"]


def tenant_rows(results):
    rows = []
    for tenant in results["scenario"]["tenants"]:
        for mode, r in _ran(results):
            f = r["tenants"][tenant["name"]]
            inflation = (f.get("latency_inflation") or {}).get("p99_us")
            if mode == "solo" and f.get("latency"):
                inflation = 1.0
            # Alone nothing is shared: an entitlement there would only compare the tenant with its limit.
            entitled = "-" if mode == "solo" else pct(f.get("entitled"))
            rows.append([tenant["name"], mode, pct(f.get("share")), entitled, num(f.get("np")),
                         throughput(f), ms(_latency(f, "p50_us")), ms(_latency(f, "p99_us")), times(inflation),
                         _refused(f)])
    return rows


def _violations(run):
    if run["quota_violations"] is not None:
        return str(run["quota_violations"])
    over = run.get("samples_over_quota_unenforced")
    return f"none enforced ({over} samples over a quota)" if over else "none enforced"


def run_rows(results):
    rows = []
    for mode, r in results["modes"].items():
        if mode == "solo":
            continue
        if r["status"] != "ran":
            rows.append([mode, f"{r['status']}: {r['reason'].splitlines()[0]}"])
            continue
        run = r["run"]
        rows.append([mode, num(run["stp"]), num(run["antt"]), num(run["jain"], 3), pct(run["worst_share_error"]),
                     pct(run["gpu_utilisation"]), pct(busy_of_unmanaged(results, mode)), _violations(run)])
    return rows


def busy_of_unmanaged(results, mode):
    """The device's busy time in `mode` as a fraction of its busy time unmanaged, in the same run."""
    unmanaged = results["modes"].get("unmanaged", {})
    if mode == "unmanaged" or unmanaged.get("status") != "ran" or results["modes"][mode].get("status") != "ran":
        return None
    base, busy = unmanaged["run"].get("gpu_utilisation"), results["modes"][mode]["run"].get("gpu_utilisation")
    return busy / base if base and busy is not None else None


def _scheduler_text(results):
    """Where gpuslice's device time went: the breakdown of what it lost against unmanaged."""
    r = results["modes"].get("gpuslice", {})
    f = r.get("scheduler")
    if r.get("status") != "ran" or not f:
        return []
    ratio = busy_of_unmanaged(results, "gpuslice")
    head = "gpuslice: device busy " + (f"{pct(ratio)} of unmanaged" if ratio is not None else pct(r["run"]["gpu_utilisation"]))
    return ["", f"{head}; {f['grants']} grants; of the wall time: hand-overs (grant start to first launch) "
                f"{pct(f['grant_start_idle'])}, holders with nothing in flight {pct(f['holder_idle'])}, "
                f"nobody eligible (limits) {pct(f['unheld_waiting'])}; drains {pct(f['drain'])} "
                f"(the device still runs the holder's queue)"]


def _text(header, rows, right_from=2):
    full = [r for r in rows if len(r) == len(header)]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *full)]
    lines = []
    for row in [header] + rows:
        if len(row) != len(header):  # a skipped or failed mode: its reason in place of the figures
            lines.append(f"{row[0]:<{widths[0]}}  {row[1]}")
            continue
        cells = [f"{c:<{w}}" if i < right_from else f"{c:>{w}}" for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def markdown(header, rows, drop_empty=False):
    """A Markdown table; with drop_empty, columns that are "-" in every row are left out."""
    if drop_empty and rows:
        keep = [i for i in range(len(header))
                if any(len(r) == len(header) and r[i] != "-" for r in rows) or i < 2]
        header = [header[i] for i in keep]
        rows = [[r[i] for i in keep] if len(r) > max(keep) else r for r in rows]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"]
    for row in rows:
        row = row + [""] * (len(header) - len(row))
        out.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(out)


def _targets_text(results):
    from .targets import text
    evaluated = results.get("targets")
    if not evaluated:
        return []
    met = sum(1 for e in evaluated if e["met"])
    return ["", f"targets: {met} of {len(evaluated)} met", text(evaluated)]


def _faults_text(results):
    lines = []
    for mode, r in _ran(results):
        hit = [(name, f) for name, f in r["tenants"].items() if "ended_by_own_fault" in f or "ended_by_others_fault" in f]
        if hit:
            lines.append(f"faults, {mode}: " + "; ".join(
                f"{name}: {f.get('ended_by_own_fault', 0)} by its own, {f.get('ended_by_others_fault', 0)} by another's"
                for name, f in hit))
    return [""] + lines if lines else []


def text_report(results):
    s = results["scenario"]
    head = f"{s['name']}: {results['platform']['description']}, {s['duration_s']:g} s per mode"
    return "\n".join([head, "", _text(TENANT_HEADER, tenant_rows(results)), "",
                      _text(RUN_HEADER, run_rows(results))] + _scheduler_text(results) + _faults_text(results) +
                     _targets_text(results))


def _refusals_brief(fig, mode):
    a = fig.get("allocations")
    if a is None:
        return "-"
    if not a["refused"]:
        return "0"
    quota = fig.get("memory_quota")
    # Under enforcement a tenant that asked for more than its quota was refused for that; anyone
    # else was refused because the device was full.
    why = "over its quota" if mode in ("gpuslice", "mps") and quota and a["asked_bytes"] > quota else \
        "its instance full" if mode == "mig" else "GPU full"
    return f"{a['refused']} ({why})"


BRIEF_HEADER = ["tenant", "mode", "GPU share (entitled)", "p99 latency (vs alone)", "refused allocations"]


def brief_rows(results):
    rows = []
    for tenant in results["scenario"]["tenants"]:
        for mode, r in _ran(results):
            f = r["tenants"][tenant["name"]]
            if mode == "solo" and not f.get("latency"):
                continue  # alone, only the latency baseline matters here
            share = pct(f.get("share")) + ("" if mode == "solo" else f" ({pct(f.get('entitled'))})")
            p99 = _latency(f, "p99_us")
            inflation = (f.get("latency_inflation") or {}).get("p99_us")
            latency = "-" if p99 is None else f"{p99 / 1000:.1f} ms" + (f" ({inflation:.1f}x)" if inflation else "")
            rows.append([tenant["name"], "alone" if mode == "solo" else mode, share, latency, _refusals_brief(f, mode)])
    return rows


def _quotas_brief(run):
    if run["quota_violations"] is not None:
        return f"{run['quota_violations']} violations"
    return _violations(run)


def brief_report(results):
    """The demo's table: who got what share, the p99 latency, refused allocations; one line per mode."""
    s = results["scenario"]
    lines = [f"{s['name']} on the {results['platform']['description']}, {s['duration_s']:g} s per mode", "",
             _text(BRIEF_HEADER, brief_rows(results), right_from=len(BRIEF_HEADER)), ""]
    for mode, r in results["modes"].items():
        if mode == "solo":
            continue
        if r["status"] != "ran":
            lines.append(f"{mode}: {r['status']}: {r['reason'].splitlines()[0]}")
            continue
        run = r["run"]
        ratio = busy_of_unmanaged(results, mode)
        busy = pct(run['gpu_utilisation']) + (f" ({pct(ratio)} of unmanaged)" if ratio is not None else "")
        lines.append(f"{mode}: GPU busy {busy}, Jain's fairness {num(run['jain'], 2)}, "
                     f"worst share error {pct(run['worst_share_error'])}, quotas: {_quotas_brief(run)}")
    return "\n".join(lines + _targets_text(results))
