"""The shim's per-call cost: shim_overhead_bench (Google Benchmark) run as is, its medians read
from its JSON output, each intercepted call next to the same call made directly.

It runs twice when the build has the null driver (bench/null_driver.cc): over the simulated
driver (what the tests see) and over a driver that does nothing (the shim's own cost).
"""
import json
import os
import re
import subprocess

from . import table
from .machine import clean_environment


def _medians(output):
    """{benchmark name: median real time in ns} from --benchmark_format=json output."""
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}
    medians = {}
    for b in json.loads(output)["benchmarks"]:
        if b.get("aggregate_name", "median") != "median":
            continue
        name = re.sub(r"/.*$", "", b.get("run_name", b["name"]))
        medians[name] = b["real_time"] * scale[b.get("time_unit", "ns")]
    return medians


def _pairs(medians):
    rows = []
    for name, direct in medians.items():
        if name.endswith("_Direct"):
            call = name[len("BM_"):-len("_Direct")] if name.startswith("BM_") else name[:-len("_Direct")]
            shim = medians.get(name[:-len("_Direct")] + "_Shim")
            rows.append({"call": call, "direct_ns": direct, "shim_ns": shim,
                         "added_ns": None if shim is None else shim - direct})
    return rows


def run(paths, quick):
    """{"drivers": [{"driver", "calls": [...]}]} or raises RuntimeError."""
    if not os.path.exists(paths.overhead_bench):
        raise RuntimeError(f"{paths.overhead_bench} is not built (cmake --build {paths.build_dir} --target shim_overhead_bench)")
    drivers = [("simulated driver", None)]
    null_dir = os.path.join(paths.build_dir, "nulldriver")
    if os.path.exists(os.path.join(null_dir, "libcuda.so.1")):
        drivers.append(("null driver (the shim's own cost)", null_dir))
    out = []
    for label, libdir in drivers:
        env = clean_environment()
        if libdir:
            env["LD_LIBRARY_PATH"] = libdir
        argv = [paths.overhead_bench, "--benchmark_format=json"] + (["--benchmark_min_time=0.05"] if quick else [])
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
        command = (f"LD_LIBRARY_PATH={libdir} " if libdir else "") + " ".join(argv)
        if done.returncode != 0:
            raise RuntimeError(f"{command} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
        out.append({"driver": label, "command": command, "calls": _pairs(_medians(done.stdout))})
    return {"drivers": out}


def markdown(overhead):
    rows = []
    for d in overhead["drivers"]:
        for c in d["calls"]:
            rows.append([c["call"], d["driver"], f"{c['direct_ns']:.0f}",
                         "-" if c["shim_ns"] is None else f"{c['shim_ns']:.0f}",
                         "-" if c["added_ns"] is None else f"{c['added_ns']:+.0f}"])
    commands = "".join(f"- {d['driver']}: `{d['command']}`\n" for d in overhead["drivers"])
    return ("Medians of Google Benchmark's repetitions, nanoseconds per call, the same call made directly "
            "and through the shim's hooks:\n\n" + commands + "\n" +
            table.markdown(["call", "driver", "direct ns", "through the shim ns", "added ns"], rows))


def text(overhead):
    lines = ["per-call overhead (median ns)", f"{'call':<16}{'driver':<36}{'direct':>9}{'shim':>9}{'added':>9}"]
    for d in overhead["drivers"]:
        for c in d["calls"]:
            shim = "-" if c["shim_ns"] is None else f"{c['shim_ns']:.0f}"
            added = "-" if c["added_ns"] is None else f"{c['added_ns']:+.0f}"
            lines.append(f"{c['call']:<16}{d['driver']:<36}{c['direct_ns']:>9.0f}{shim:>9}{added:>9}")
    return "\n".join(lines)
