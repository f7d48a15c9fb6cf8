"""Targets: what a scenario promises, carried in its YAML and checked against the results.

A target names a figure (`metric`) of one tenant or of the whole run in one mode, and bounds it
by a number or by another figure of the same results (the same tenant alone, unmanaged, ...):

  - metric: p99_ms               # one of METRICS
    tenant: service              # for per-tenant metrics
    mode: gpuslice               # default gpuslice
    at_most: {mode: solo, plus: 5}   # or at_least; or within: 0.03 with of: 0.5
    source: issue 8, ...         # where the target comes from (shown in the report)

A bound that is a mapping is `times` × (`metric` of `tenant` in `mode`) + `plus`, each key
defaulting to the target's own. Targets are evaluated from results.json alone (`evaluate`), so a
report can be re-checked later; a missed target is reported as not met with the measured value,
and never changes gpuslice-bench's exit status.

Windows and events: `window_s` cuts the steady part of the run into consecutive windows of that
length (the worst one counts); `event` names an entry of the scenario's `events` (its index),
and the figure is taken from the event to the same tenant's next event (or the end of the
steady part), starting `after_s` seconds after it. Windows scale with --quick/--scale (they
are slices of the run); `after_s` and the bounds do not (they are the target's own).
"""
import dataclasses

from . import scenario as _scenario

# name: (scope, unit, what it is). scope: tenant (needs `tenant`), run (none), either.
METRICS = {
    "share": ("tenant", "fraction", "device busy time ÷ wall time over the steady windows"),
    "entitled": ("tenant", "fraction", "the share weighted max-min fairness promises"),
    "np": ("tenant", "ratio", "normalised progress (shared ÷ alone)"),
    "kernels_per_s": ("tenant", "rate", "kernels completed per second"),
    "p50_ms": ("tenant", "ms", "median request latency"),
    "p99_ms": ("tenant", "ms", "99th percentile request latency"),
    "p999_ms": ("tenant", "ms", "99.9th percentile request latency"),
    "max_ms": ("tenant", "ms", "the longest request"),
    "missed_periods": ("tenant", "count", "periods that passed while a request ran"),
    "idle_left_by_others": ("tenant", "fraction", "1 − the other tenants' shares (the time they leave)"),
    "worst_share_error": ("either", "fraction", "largest |share − entitled| in any (window_s) window"),
    "jain": ("run", "ratio", "Jain's index over NP ÷ entitled NP"),
    "worst_window_jain": ("run", "ratio", "lowest Jain's index over share ÷ entitled in a window_s window"),
    "gpu_busy": ("run", "fraction", "device busy time ÷ wall time over the steady windows"),
    "busy_after_event": ("tenant", "fraction", "the tenant's busy fraction from after_s after the event on"),
    "event_idle_ms": ("run", "ms", "device idle time from the event to the tenant's next one, beyond the idle "
                                   "rate of the steady windows before the first event"),
}
COMPARISONS = ("at_most", "at_least", "within")
_TARGET_KEYS = ["metric", "source", "tenant", "mode", "at_most", "at_least", "within", "of", "window_s", "event",
                "after_s"]
_REF_KEYS = ["metric", "tenant", "mode", "times", "plus"]
_WINDOW_SLACK = 0.98  # a window of samples 1 s apart may sum to 9.99 s


@dataclasses.dataclass(frozen=True)
class Ref:
    """times × (metric of tenant in mode) + plus; None fields are the target's own."""
    metric: str = None
    tenant: str = None
    mode: str = None
    times: float = 1.0
    plus: float = 0.0


@dataclasses.dataclass(frozen=True)
class Target:
    metric: str
    mode: str
    comparison: str          # at_most, at_least or within
    bound: object            # a number or a Ref (within: the value it must be near)
    source: str
    tenant: str = None
    tolerance: float = None  # within: how far from the bound
    window_s: float = None
    event: int = None
    after_s: float = 0.0

    def scaled(self, factor):
        return dataclasses.replace(self, window_s=self.window_s * factor) if self.window_s else self

    def to_json(self):
        d = dataclasses.asdict(self)
        if isinstance(self.bound, Ref):
            d["bound"] = dataclasses.asdict(self.bound)
        return d


# --- reading: called by scenario._Reader with itself, to name the file and key in errors --------

def _ref(reader, value, where, tenants, modes):
    if not isinstance(value, dict):
        return reader.check(value, where, _scenario._number(-1e9, unit=""))
    reader.mapping(value, where, [], _REF_KEYS)
    metric = reader.check(value["metric"], where + ".metric", _scenario._one_of(list(METRICS))) \
        if "metric" in value else None
    tenant = reader.check(value["tenant"], where + ".tenant", _scenario._one_of(tenants)) if "tenant" in value else None
    mode = reader.check(value["mode"], where + ".mode", _scenario._one_of(modes)) if "mode" in value else None
    times = reader.check(value.get("times", 1.0), where + ".times", _scenario._number(0, 1000))
    plus = reader.check(value.get("plus", 0.0), where + ".plus", _scenario._number(-1e9))
    return Ref(metric=metric, tenant=tenant, mode=mode, times=times, plus=plus)


def read_target(reader, value, where, tenants, modes, events):
    """The checked Target in `value` (a mapping at `where`); `tenants` are scenario.Tenant."""
    reader.mapping(value, where, ["metric", "source"], _TARGET_KEYS[2:])
    metric = reader.check(value["metric"], where + ".metric", _scenario._one_of(list(METRICS)))
    scope = METRICS[metric][0]
    names = [t.name for t in tenants]
    tenant = None
    if "tenant" in value:
        if scope == "run":
            reader.fail(where + ".tenant", f"'{metric}' is a figure of the whole run, not of a tenant: drop tenant")
        tenant = reader.check(value["tenant"], where + ".tenant", _scenario._one_of(names))
    elif scope == "tenant":
        reader.fail(where, f"missing key 'tenant' ('{metric}' is a figure of one tenant)")
    mode = reader.check(value.get("mode", "gpuslice"), where + ".mode", _scenario._one_of(modes))
    given = [c for c in COMPARISONS if c in value]
    if len(given) != 1:
        reader.fail(where, "expected exactly one of at_most, at_least (a bound) or within (with of)")
    comparison = given[0]
    tolerance = None
    if comparison == "within":
        tolerance = reader.check(value["within"], where + ".within", _scenario._number(0, unit=" (how far from `of`)"))
        if "of" not in value:
            reader.fail(where, "missing key 'of': within says how far from what")
        bound = _ref(reader, value["of"], where + ".of", names, modes)
    else:
        if "of" in value:
            reader.fail(where + ".of", f"'of' goes with within, not {comparison}")
        bound = _ref(reader, value[comparison], f"{where}.{comparison}", names, modes)
    if isinstance(bound, Ref) and bound.metric and METRICS[bound.metric][0] == "tenant" and not (bound.tenant or tenant):
        reader.fail(where, f"the bound's '{bound.metric}' is a figure of one tenant: name its tenant")
    window = reader.check(value["window_s"], where + ".window_s", _scenario._number(0, 3600, " (seconds)")) \
        if "window_s" in value else None
    if window is not None and metric not in ("worst_share_error", "worst_window_jain"):
        reader.fail(where + ".window_s", "only worst_share_error and worst_window_jain are taken over windows")
    if metric == "worst_window_jain" and window is None:
        reader.fail(where, "missing key 'window_s' (worst_window_jain is the worst of windows that long)")
    event = None
    needs_event = metric in ("busy_after_event", "event_idle_ms")
    if "event" in value:
        if not needs_event:
            reader.fail(where + ".event", "only busy_after_event and event_idle_ms are taken around an event")
        if not events:
            reader.fail(where + ".event", "the scenario has no events")
        event = reader.check(value["event"], where + ".event",
                             _scenario._integer(0, len(events) - 1, " (an index into events)"))
    elif needs_event:
        reader.fail(where, f"missing key 'event' ('{metric}' is measured around one of the scenario's events)")
    after = reader.check(value.get("after_s", 0.0), where + ".after_s",
                         _scenario._number(0, 3600, " (seconds)", low_inclusive=True))
    if "after_s" in value and metric != "busy_after_event":
        reader.fail(where + ".after_s", "only busy_after_event starts after the event")
    source = reader.check(value["source"], where + ".source", _scenario._text)
    return Target(metric=metric, mode=mode, comparison=comparison, bound=bound, source=source, tenant=tenant,
                  tolerance=tolerance, window_s=window, event=event, after_s=after)


# --- evaluating: from results.json alone ----------------------------------------------------------

class _NotMeasured(Exception):
    pass


def _rows(mode_results):
    tl = mode_results.get("timeline")
    if not tl or "t0" not in tl:
        raise _NotMeasured("no timeline in this mode")
    rows = []
    for i, (t0, t1) in enumerate(zip(tl["t0"], tl["t1"])):
        rows.append({"t0": t0, "t1": t1, "dt": t1 - t0, "steady": tl["steady"][i], "util": tl["utilisation"][i],
                     "share": {n: v[i] for n, v in tl["share"].items()},
                     "entitled": {n: v[i] for n, v in tl["entitled"].items()}})
    return rows, tl.get("end_s")


def _windows(rows, length):
    """Consecutive runs of steady rows cut into windows at least `length` long."""
    out, current = [], []
    for r in rows:
        if not r["steady"]:
            current = []
            continue
        current.append(r)
        if sum(x["dt"] for x in current) >= length * _WINDOW_SLACK:
            out.append(current)
            current = []
    if not out:
        raise _NotMeasured(f"no {length:g} s window of steady samples in the run")
    return out


def _mean(rows, pick):
    total = sum(r["dt"] for r in rows)
    return sum(pick(r) * r["dt"] for r in rows) / total


def _jain(xs):
    squares = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * squares) if squares > 0 else None


def _event_span(results, mode_results, index):
    """(at, until): the event's time in this run and the same tenant's next event (or the end)."""
    events = mode_results.get("events") or []
    if index >= len(events) or events[index].get("at_s") is None:
        raise _NotMeasured(f"event {index} was not sent in this run")
    event = events[index]
    later = [e["at_s"] for e in events if e["tenant"] == event["tenant"] and e.get("at_s") is not None
             and e["at_s"] > event["at_s"]]
    _, end = _rows(mode_results)
    until = min(later + ([end] if end is not None else []), default=None)
    if until is None:
        raise _NotMeasured("the run has no end of its steady part")
    return event["at_s"], until, events


def _value(results, metric, tenant, mode, target):
    m = results["modes"].get(mode)
    if m is None or m.get("status") != "ran":
        raise _NotMeasured(f"mode {mode} {m['status'] if m else 'did not run'}")
    figs = m["tenants"].get(tenant) if tenant else None
    if tenant and figs is None:
        raise _NotMeasured(f"no figures of {tenant} in mode {mode}")
    latency_keys = {"p50_ms": "p50_us", "p99_ms": "p99_us", "p999_ms": "p999_us", "max_ms": "max_us"}
    if metric in latency_keys:
        lat = figs.get("latency")
        if not lat:
            raise _NotMeasured(f"{tenant} made no requests in mode {mode}")
        return lat[latency_keys[metric]] / 1000
    if metric in ("share", "entitled", "np", "kernels_per_s", "missed_periods") or \
            (metric == "worst_share_error" and tenant and not target.window_s):
        if figs.get(metric) is None:
            raise _NotMeasured(f"no {metric} of {tenant} in mode {mode}")
        return figs[metric]
    if metric == "idle_left_by_others":
        others = [f.get("share") for n, f in m["tenants"].items() if n != tenant]
        if any(s is None for s in others):
            raise _NotMeasured(f"a tenant beside {tenant} has no share in mode {mode}")
        return 1 - sum(others)
    if metric in ("jain", "gpu_busy") or metric == "worst_share_error" and not target.window_s:
        key = {"gpu_busy": "gpu_utilisation"}.get(metric, metric)
        if (m.get("run") or {}).get(key) is None:
            raise _NotMeasured(f"no {metric} in mode {mode}")
        return m["run"][key]
    rows, _ = _rows(m)
    if metric == "worst_share_error":
        names = [tenant] if tenant else list(rows[0]["share"]) if rows else []
        return max(abs(_mean(w, lambda r: r["share"][n]) - _mean(w, lambda r: r["entitled"][n]))
                   for w in _windows(rows, target.window_s) for n in names)
    if metric == "worst_window_jain":
        worst = None
        for w in _windows(rows, target.window_s):
            xs = [_mean(w, lambda r: r["share"][n]) / e for n in w[0]["share"]
                  if (e := _mean(w, lambda r: r["entitled"][n])) > 0]
            j = _jain(xs) if xs else None
            if j is not None and (worst is None or j < worst):
                worst = j
        if worst is None:
            raise _NotMeasured("no window with an entitled tenant")
        return worst
    at, until, events = _event_span(results, m, target.event)
    if metric == "busy_after_event":
        start = at + target.after_s
        inside = [r for r in rows if r["t0"] >= start - 1e-6 and r["t1"] <= until + 1e-6]
        if not inside:
            raise _NotMeasured(f"no sample window between {start:.2f} s and {until:.2f} s")
        return _mean(inside, lambda r: r["share"][tenant])
    # event_idle_ms: every window that overlaps the event's span, less the usual idle rate.
    first = min(e["at_s"] for e in events if e.get("at_s") is not None)
    before = [r for r in rows if r["steady"] and r["t1"] <= first + 1e-6]
    if not before:
        raise _NotMeasured("no steady window before the first event to take the usual idle rate from")
    usual = _mean(before, lambda r: 1 - r["util"])
    inside = [r for r in rows if r["t1"] > at and r["t0"] < until]
    span = sum(r["dt"] for r in inside)
    return (sum((1 - r["util"]) * r["dt"] for r in inside) - usual * span) * 1000


def _bound(results, target):
    b = target.bound
    if not isinstance(b, Ref):
        return b
    ref = dataclasses.replace(target, metric=b.metric or target.metric, tenant=b.tenant or target.tenant,
                              mode=b.mode or target.mode)
    if METRICS[ref.metric][0] == "run":
        ref = dataclasses.replace(ref, tenant=None)
    return b.times * _value(results, ref.metric, ref.tenant, ref.mode, ref) + b.plus


def _format(unit, x):
    if x is None:
        return "-"
    if unit == "fraction":
        return f"{100 * x:.1f}%"
    if unit == "ms":
        return f"{x:.2f} ms"
    if unit == "count":
        return f"{x:.0f}"
    if unit == "rate":
        return f"{x:.0f}/s"
    return f"{x:.3f}"


def _ref_text(target):
    b = target.bound
    if not isinstance(b, Ref):
        return None
    parts = []
    if b.times != 1:
        parts.append(f"{100 * b.times:g}% of" if METRICS[target.metric][1] == "fraction" else f"{b.times:g} ×")
    what = b.metric or target.metric
    whose = b.tenant if b.tenant and b.tenant != target.tenant else ""
    mode = "alone" if b.mode == "solo" else (b.mode or target.mode)
    parts.append(" ".join(x for x in (whose, what, mode) if x))
    if b.plus:
        unit = METRICS[target.metric][1]
        parts.append(("+ " if b.plus > 0 else "− ") + (f"{abs(b.plus) * 100:g} point" + ("" if abs(b.plus) == 0.01 else "s") if unit == "fraction"
                                                      else f"{abs(b.plus):g} ms" if unit == "ms" else f"{abs(b.plus):g}"))
    return " ".join(parts)


def describe(target):
    """One line: what the target says, e.g. 'service p99_ms under gpuslice ≤ p99_ms alone + 5 ms'."""
    unit = METRICS[target.metric][1]
    subject = " ".join(x for x in (target.tenant, target.metric) if x)
    if target.window_s:
        subject += f" ({target.window_s:g} s windows)"
    if target.event is not None:
        subject += f" (event {target.event}" + (f", from {target.after_s:g} s after" if target.after_s else "") + ")"
    bound = _ref_text(target) or _format(unit, target.bound)
    if target.comparison == "within":
        tol = f"{100 * target.tolerance:g} points" if unit == "fraction" else _format(unit, target.tolerance)
        return f"{subject} under {target.mode} within {tol} of {bound}"
    return f"{subject} under {target.mode} {'≤' if target.comparison == 'at_most' else '≥'} {bound}"


def evaluate(targets, results):
    """[{target, source, measured, bound, met, why}]: met is True/False, or None when not measured."""
    out = []
    for t in targets:
        unit = METRICS[t.metric][1]
        entry = {"target": describe(t), "source": t.source, "metric": t.metric, "tenant": t.tenant, "mode": t.mode,
                 "measured": None, "bound": None, "met": None, "why": None}
        try:
            measured = _value(results, t.metric, t.tenant, t.mode, t)
            bound = _bound(results, t)
        except _NotMeasured as e:
            entry["why"] = str(e)
            out.append(entry)
            continue
        if t.comparison == "at_most":
            met = measured <= bound
        elif t.comparison == "at_least":
            met = measured >= bound
        else:
            met = abs(measured - bound) <= t.tolerance
        bound_text = _format(unit, bound)
        if t.comparison == "within":
            bound_text += " ± " + (f"{100 * t.tolerance:g} points" if unit == "fraction" else _format(unit, t.tolerance))
        else:
            bound_text = ("≤ " if t.comparison == "at_most" else "≥ ") + bound_text
        entry.update(measured=measured, bound=bound, met=met, measured_text=_format(unit, measured),
                     bound_text=bound_text)
        out.append(entry)
    return out


def text(evaluated):
    """The targets as plain lines: met / NOT MET / not measured, with the measured value."""
    lines = []
    for e in evaluated:
        if e["met"] is None:
            verdict = f"not measured ({e['why']})"
        else:
            verdict = ("met" if e["met"] else "NOT MET") + f": {e['measured_text']} (target {e['bound_text']})"
        lines.append(f"  {e['target']}: {verdict}")
        lines.append(f"      source: {e['source']}")
    return "\n".join(lines)


def markdown(evaluated):
    from .table import markdown as md
    rows = [[e["target"], e.get("measured_text", "-"), e.get("bound_text", "-"),
             "not measured: " + e["why"] if e["met"] is None else "yes" if e["met"] else "**no**", e["source"]]
            for e in evaluated]
    return md(["target", "measured", "target value", "met", "source"], rows)
