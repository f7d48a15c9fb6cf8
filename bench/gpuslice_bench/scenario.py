"""Scenarios: the YAML files of bench/scenarios/, read and checked before anything runs.

A mistake in a hand-written file is reported as one line naming the file, the key (as a path
such as tenants[1].workload.kernel_us) and what would be valid; see docs/benchmarks.md for the
format. Durations in a scenario are the full form; `scaled` gives the reduced one.
"""
import dataclasses
import re

import yaml

from .quantities import parse_bytes
from . import mig as _mig
from . import targets as _targets  # (they import this module back for its checks)

MODES = ("solo", "unmanaged", "gpuslice", "mps", "mig")
WIDTHS = ("narrow", "wide")  # gpuslice-workload --width
KINDS = ("compute", "latency", "memory", "arrival")
MEMORY_APIS = ("alloc", "pitch", "managed", "async", "pool", "vmm", "array")
_TENANT_NAME = re.compile(r"^[A-Za-z0-9._-]{1,63}$")
_SCENARIO_NAME = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
MAX_TENANTS = 32
MAX_PROCESSES = 128
CLASSES = ("latency", "standard", "background")  # GPUSLICE_COMPUTE_CLASS
SIGNALS = ("STOP", "CONT", "KILL", "TERM")


class ScenarioError(Exception):
    """A scenario that cannot run; str() is the one line to show."""


@dataclasses.dataclass(frozen=True)
class Workload:
    kind: str
    processes: int
    start: float     # seconds after the mode's run begins
    params: dict     # the kind's options, as gpuslice-workload names them (underscored)

    def signature(self):
        """Equal for workloads that behave alike when alone (solo runs are shared)."""
        return (self.kind, self.processes, self.start, tuple(sorted(self.params.items())))


@dataclasses.dataclass(frozen=True)
class Tenant:
    name: str
    workloads: tuple
    memory_quota: str = None   # as written: "8Gi", "25%", or None for no quota
    request: int = None        # GPUSLICE_COMPUTE_REQUEST; None: the shim's default (10)
    limit: int = None          # GPUSLICE_COMPUTE_LIMIT; None: 100
    compute_class: str = None  # GPUSLICE_COMPUTE_CLASS; None: the shim's default (standard)
    mig: str = None            # its MIG instance's profile in mode mig; None: derived from the requests

    def quota_bytes(self, gpu_memory):
        if self.memory_quota is None:
            return None
        if self.memory_quota.endswith("%"):
            return gpu_memory * int(self.memory_quota[:-1]) // 100
        return parse_bytes(self.memory_quota)

    @property
    def weight(self):
        return self.request if self.request is not None else 10

    @property
    def cap(self):
        return (self.limit if self.limit is not None else 100) / 100

    def has(self, kind):
        return any(w.kind == kind for w in self.workloads)

    @property
    def latency_sensitive(self):
        return self.has("latency") or self.has("arrival")

    def signature(self):
        return tuple(w.signature() for w in self.workloads)


@dataclasses.dataclass(frozen=True)
class Event:
    """A signal sent, `at` seconds into a run, to some of a tenant's processes."""
    at: float
    signal: str
    tenant: str
    workload: int = None   # index into the tenant's workloads; None: every workload
    processes: int = None  # how many of the selected processes (the first ones); None: all

    def to_json(self):
        return {"at": self.at, "signal": self.signal, "tenant": self.tenant, "workload": self.workload,
                "processes": self.processes}


@dataclasses.dataclass(frozen=True)
class Scenario:
    path: str
    name: str
    description: str
    duration: float
    gpu_memory: str
    timeslice_us: int
    modes: tuple
    sample_interval: float
    tenants: tuple
    events: tuple = ()
    targets: tuple = ()    # targets.Target, checked against the results after the run
    quantum_ms: float = None  # gpuslice's quantum (gpuslicectl set); None: its default
    model: str = None      # GPUSLICE_SIM_MODEL in every mode (MIG profiles, SM count); None: the default
    mig_layout: tuple = () # (tenant name, profile) per tenant, largest first: the instances of mode mig

    @property
    def gpu_memory_bytes(self):
        return parse_bytes(self.gpu_memory)

    def scaled(self, factor):
        """Every time in the scenario multiplied by `factor`; samples at least every 0.25 s."""
        def times(params):  # the options that are times in the run
            return {k: (v * factor if k in ("hold", "fault_at") and v is not None else v) for k, v in params.items()}
        workloads = lambda t: tuple(dataclasses.replace(w, start=w.start * factor, params=times(w.params))
                                    for w in t.workloads)
        # A target's window is a slice of the run and shrinks with it; its bounds (and the delay
        # after an event a target allows) are the target's own and do not.
        return dataclasses.replace(
            self, duration=self.duration * factor,
            sample_interval=min(self.sample_interval, max(0.25, self.sample_interval * factor)),
            tenants=tuple(dataclasses.replace(t, workloads=workloads(t)) for t in self.tenants),
            events=tuple(dataclasses.replace(e, at=e.at * factor) for e in self.events),
            targets=tuple(t.scaled(factor) for t in self.targets))

    def to_json(self):
        return {"name": self.name, "description": self.description, "path": self.path,
                "duration_s": self.duration, "gpu_memory": self.gpu_memory, "timeslice_us": self.timeslice_us,
                "quantum_ms": self.quantum_ms, "model": self.model,
                "mig_layout": [{"tenant": name, "profile": profile} for name, profile in self.mig_layout],
                "modes": list(self.modes), "sample_interval_s": self.sample_interval,
                "events": [e.to_json() for e in self.events],
                "targets": [t.to_json() for t in self.targets],
                "tenants": [{"name": t.name, "memory_quota": t.memory_quota, "request": t.request, "limit": t.limit,
                             "class": t.compute_class, "mig": t.mig,
                             "workloads": [dict(kind=w.kind, processes=w.processes, start=w.start, **w.params)
                                           for w in t.workloads]} for t in self.tenants]}


# --- checks: each returns the value or raises _Invalid with what would be valid -----------------

class _Invalid(Exception):
    pass


def _show(value):
    return repr(value) if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _integer(low, high, unit=""):
    def check(value):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _Invalid(f"expected an integer from {low} to {high}{unit}")
        return value
    return check


def _number(low, high=None, unit="", low_inclusive=False):
    def check(value):
        ok = not isinstance(value, bool) and isinstance(value, (int, float))
        ok = ok and (value >= low if low_inclusive else value > low) and (high is None or value <= high)
        if not ok:
            bound = f"{'at least' if low_inclusive else 'above'} {low}" + (f" and at most {high}" if high else "")
            raise _Invalid(f"expected a number {bound}{unit}")
        return float(value)
    return check


def _bytes(value):
    n = parse_bytes(value)
    if not n:
        raise _Invalid("expected a byte quantity above 0 such as 512Mi, 4Gi, 4G or plain bytes")
    return value if isinstance(value, str) else str(value)


def _quota(value):
    if isinstance(value, str) and value.endswith("%"):
        digits = value[:-1]
        if digits.isdigit() and 1 <= int(digits) <= 100:
            return value
        raise _Invalid("expected a percentage from 1% to 100%, or a byte quantity such as 8Gi")
    try:
        return _bytes(value)
    except _Invalid:
        raise _Invalid("expected a byte quantity above 0 such as 512Mi, 4Gi, 4G, or a percentage such as 25%")


def _one_of(choices):
    def check(value):
        if value not in choices:
            raise _Invalid("expected one of " + ", ".join(choices))
        return value
    return check


def _matching(pattern, message):
    def check(value):
        if not isinstance(value, str) or not pattern.match(value):
            raise _Invalid(message)
        return value
    return check


def _boolean(value):
    if not isinstance(value, bool):
        raise _Invalid("expected true or false")
    return value


def _text(value):
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("expected non-empty text")
    return value.strip()


_SECONDS = _number(0, 86400, " (seconds)")

# Per kind: key -> (check, default). Names and limits mirror gpuslice-workload's options.
_KIND_KEYS = {
    "compute": {"kernel_us": (_integer(1, 60_000_000, " (microseconds)"), 1000),
                "depth": (_integer(1, 1024, " (kernels in flight)"), 2),
                "width": (_one_of(WIDTHS), "narrow"),
                # Seconds after its start: the process launches a faulting kernel (illegal address).
                "fault_at": (_number(0, 86400, " (seconds)"), None)},
    "latency": {"period_ms": (_number(0, 60_000, " (milliseconds)"), 10.0),
                "kernels_per_request": (_integer(1, 1024), 3),
                "kernel_us": (_integer(1, 60_000_000, " (microseconds)"), 200),
                "width": (_one_of(WIDTHS), "narrow"),
                # Not a workload option: the latency the service promises, for SLO attainment.
                "slo_ms": (_number(0, 60_000, " (milliseconds)"), None)},
    "memory": {"api": (_one_of(MEMORY_APIS), "alloc"),
               "chunk": (_bytes, "64Mi"),
               "count": (_integer(1, 1 << 20), 1),
               "hold": (_number(0, 86400, " (seconds)", low_inclusive=True), None),
               "touch": (_boolean, False)},
    # Not a gpuslice-workload kind: processes of one kernel each, started one after another.
    "arrival": {"count": (_integer(1, 100_000), 100),
                "kernel_us": (_integer(1, 60_000_000, " (microseconds)"), 100),
                "new_tenant": (_boolean, False),
                "gap_ms": (_number(0, 60_000, " (milliseconds)", low_inclusive=True), 0.0)},
}
_WORKLOAD_KEYS = ("kind", "processes", "start")


class _Reader:
    """Walks one file's document, naming every key by its path in errors."""

    def __init__(self, path):
        self.path = path

    def fail(self, where, message, value=dataclasses.MISSING):
        got = "" if value is dataclasses.MISSING else f", got {_show(value)}"
        raise ScenarioError(f"{self.path}: {where}: {message}{got}")

    def mapping(self, value, where, required, optional):
        if not isinstance(value, dict):
            self.fail(where, "expected a mapping of " + ", ".join(required + optional), value)
        for key in value:
            if key not in required and key not in optional:
                self.fail(where, f"unknown key {_show(key)}; valid keys: " + ", ".join(required + optional))
        for key in required:
            if key not in value:
                self.fail(where, f"missing key '{key}' (required: " + ", ".join(required) + ")")
        return value

    def check(self, value, where, check):
        try:
            return check(value)
        except _Invalid as e:
            self.fail(where, str(e), value)

    def workload(self, value, where, default_processes, duration):
        if not isinstance(value, dict) or "kind" not in value:
            self.fail(where, "expected a mapping with 'kind' (" + ", ".join(KINDS) + ") and the kind's options", value)
        kind = self.check(value["kind"], where + ".kind", _one_of(KINDS))
        keys = _KIND_KEYS[kind]
        self.mapping(value, where, [], list(_WORKLOAD_KEYS) + list(keys))
        processes = self.check(value.get("processes", default_processes), where + ".processes",
                               _integer(1, MAX_PROCESSES))
        start = self.check(value.get("start", 0), where + ".start", _number(0, unit=" (seconds)", low_inclusive=True))
        if start >= duration:
            self.fail(where + ".start", f"expected a number of seconds below the duration ({duration:g})", value["start"])
        params = {key: self.check(value[key], f"{where}.{key}", check) if key in value else default
                  for key, (check, default) in keys.items()}
        if kind == "memory":
            if params["api"] == "array" and params["touch"]:
                self.fail(where + ".touch", "arrays are not linear memory and cannot be touched; drop touch for api array")
            if params["hold"] is not None and start + params["hold"] > duration:
                self.fail(where + ".hold", f"expected at most duration - start = {duration - start:g} seconds",
                          value["hold"])
        if params.get("fault_at") is not None and start + params["fault_at"] >= duration:
            self.fail(where + ".fault_at", f"expected below duration - start = {duration - start:g} seconds",
                      value["fault_at"])
        return Workload(kind=kind, processes=processes, start=start, params=params)

    def tenant(self, value, where, duration):
        self.mapping(value, where, ["name"], ["workload", "workloads", "memory_quota", "compute", "processes", "mig"])
        name = self.check(value["name"], where + ".name",
                          _matching(_TENANT_NAME, "expected 1 to 63 of A-Z a-z 0-9 . _ - (a GPUSLICE_TENANT name)"))
        if ("workload" in value) == ("workloads" in value):
            self.fail(where, "expected exactly one of 'workload' (a mapping) or 'workloads' (a list of mappings)")
        default_processes = self.check(value.get("processes", 1), where + ".processes", _integer(1, MAX_PROCESSES))
        if "workload" in value:
            workloads = (self.workload(value["workload"], where + ".workload", default_processes, duration),)
        else:
            items = value["workloads"]
            if not isinstance(items, list) or not items:
                self.fail(where + ".workloads", "expected a non-empty list of workload mappings", items)
            workloads = tuple(self.workload(w, f"{where}.workloads[{i}]", default_processes, duration)
                              for i, w in enumerate(items))
        kinds = [w.kind for w in workloads]
        if "compute" in kinds and "latency" in kinds:
            self.fail(where + ".workloads", "a tenant is a trainer (compute) or a service (latency), not both: "
                      "make them two tenants")
        quota = self.check(value["memory_quota"], where + ".memory_quota", _quota) if "memory_quota" in value else None
        request = limit = compute_class = None
        if "compute" in value:
            compute = self.mapping(value["compute"], where + ".compute", [], ["request", "limit", "class"])
            if "class" in compute:
                compute_class = self.check(compute["class"], where + ".compute.class", _one_of(CLASSES))
            percent = _integer(1, 100, " (percent of the GPU's time)")
            request = self.check(compute["request"], where + ".compute.request", percent) if "request" in compute else None
            limit = self.check(compute["limit"], where + ".compute.limit", percent) if "limit" in compute else None
            if request is not None and limit is not None and limit < request:
                self.fail(where + ".compute.limit", f"expected a limit at least the request ({request})", limit)
        mig = self.check(value["mig"], where + ".mig", _matching(re.compile(r"^\S{1,32}$"), "expected a MIG profile"
                                                                    " name such as 3g.40gb")) if "mig" in value else None
        return Tenant(name=name, workloads=workloads, memory_quota=quota, request=request, limit=limit,
                      compute_class=compute_class, mig=mig)

    def event(self, value, where, tenants, duration):
        self.mapping(value, where, ["at", "signal", "tenant"], ["workload", "processes"])
        at = self.check(value["at"], where + ".at", _number(0, unit=" (seconds after the run starts)"))
        if at >= duration:
            self.fail(where + ".at", f"expected a number of seconds below the duration ({duration:g})", value["at"])
        signal = self.check(value["signal"], where + ".signal", _one_of(SIGNALS))
        names = [t.name for t in tenants]
        name = self.check(value["tenant"], where + ".tenant", _one_of(names))
        tenant = tenants[names.index(name)]
        workload = None
        if "workload" in value:
            workload = self.check(value["workload"], where + ".workload",
                                  _integer(0, len(tenant.workloads) - 1, f" (an index into {name}'s workloads)"))
        chosen = tenant.workloads if workload is None else (tenant.workloads[workload],)
        processes = None
        if "processes" in value:
            processes = self.check(value["processes"], where + ".processes",
                                   _integer(1, sum(w.processes for w in chosen), f" (of {name}'s processes)"))
        return Event(at=at, signal=signal, tenant=name, workload=workload, processes=processes)

    def scenario(self, doc):
        top = self.mapping(doc, "top level", ["name", "description", "duration", "modes", "tenants"],
                           ["gpu", "sample_interval", "events", "targets"])
        name = self.check(top["name"], "name",
                          _matching(_SCENARIO_NAME, "expected 1 to 100 of A-Z a-z 0-9 . _ - (it names the report folder)"))
        description = self.check(top["description"], "description", _text)
        duration = self.check(top["duration"], "duration", _number(0, 3600, " (seconds each mode runs)"))
        gpu = self.mapping(top.get("gpu", {}), "gpu", [], ["memory", "timeslice_us", "quantum_ms", "model"])
        model = self.check(gpu["model"], "gpu.model", _one_of(_mig.MODELS)) if "model" in gpu else None
        quantum = self.check(gpu["quantum_ms"], "gpu.quantum_ms", _number(0.999, 1000, " (milliseconds, 1 to 1000)")) \
            if "quantum_ms" in gpu else None
        gpu_memory = self.check(gpu.get("memory", "80Gi"), "gpu.memory", _bytes)
        timeslice = self.check(gpu["timeslice_us"], "gpu.timeslice_us", _integer(100, 1_000_000, " (microseconds)")) \
            if "timeslice_us" in gpu else None
        modes = top["modes"]
        if not isinstance(modes, list) or not modes:
            self.fail("modes", "expected a non-empty list of " + ", ".join(MODES), modes)
        for i, mode in enumerate(modes):
            self.check(mode, f"modes[{i}]", _one_of(MODES))
            if mode in modes[:i]:
                self.fail(f"modes[{i}]", f"'{mode}' is listed twice")
        interval = self.check(top.get("sample_interval", 1.0), "sample_interval", _number(0.05, 10, " (seconds)"))
        tenants = top["tenants"]
        if not isinstance(tenants, list) or not 1 <= len(tenants) <= MAX_TENANTS:
            self.fail("tenants", f"expected a list of 1 to {MAX_TENANTS} tenant mappings", tenants)
        parsed = []
        for i, t in enumerate(tenants):
            tenant = self.tenant(t, f"tenants[{i}]", duration)
            if any(p.name == tenant.name for p in parsed):
                self.fail(f"tenants[{i}].name", f"tenant '{tenant.name}' is defined twice")
            parsed.append(tenant)
        gpu_bytes = parse_bytes(gpu_memory)
        for i, t in enumerate(parsed):
            quota = t.quota_bytes(gpu_bytes)
            if quota is not None and quota > gpu_bytes:
                self.fail(f"tenants[{i}].memory_quota", f"expected at most the GPU's memory ({gpu_memory})", t.memory_quota)
        layout = self.mig_layout(parsed, model) if "mig" in modes else ()
        events = self.items(top, "events", lambda v, w: self.event(v, w, parsed, duration))
        targets = self.items(top, "targets", lambda v, w: _targets.read_target(self, v, w, parsed, modes, events))
        return Scenario(path=self.path, name=name, description=description, duration=duration, gpu_memory=gpu_memory,
                        timeslice_us=timeslice, modes=tuple(modes), sample_interval=interval, tenants=tuple(parsed),
                        events=tuple(events), targets=tuple(targets), quantum_ms=quantum, model=model,
                        mig_layout=layout)

    def mig_layout(self, tenants, model):
        """Mode mig: one instance per tenant, named by its `mig:` or derived from its request."""
        if model is None:
            self.fail("gpu.model", "mode mig needs the GPU model whose MIG profiles apply: one of " +
                      ", ".join(_mig.MODELS))
        for i, t in enumerate(tenants):
            if t.mig is not None and t.mig not in _mig.profiles(model):
                self.fail(f"tenants[{i}].mig", f"expected a MIG profile of the {model}: " +
                          ", ".join(_mig.profiles(model)), t.mig)
        try:
            return _mig.layout(model, [(t.name, t.weight, t.mig) for t in tenants])
        except ValueError as e:
            self.fail("modes", f"mode mig: {e}")

    def items(self, top, key, read):
        """The optional list `key`, each item read by read(value, where)."""
        if key not in top:
            return []
        if not isinstance(top[key], list):
            self.fail(key, "expected a list of mappings", top[key])
        return [read(v, f"{key}[{i}]") for i, v in enumerate(top[key])]


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice (PyYAML keeps the last one silently)."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"key {_show(key)} is given twice", key_node.start_mark)
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load(path):
    """The checked Scenario in `path`; raises ScenarioError with the one line to show."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.load(f, Loader=_StrictLoader)
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read: {e.strerror}")
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        problem = getattr(e, "problem", None) or str(e)
        raise ScenarioError(f"{path}: {where}: not valid YAML: {problem}")
    return _Reader(path).scenario(doc)
