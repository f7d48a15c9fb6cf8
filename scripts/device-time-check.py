#!/usr/bin/env python3
"""What gpuslice costs the device and the services beside trainers, against no sharing layer.

Runs, on the simulated GPU, the bundled scenarios whose tenants are unlimited and together want
more than the GPU (two-wide-trainers with its limits removed), and the standard-service ones, in
modes solo, unmanaged and gpuslice, `--runs` times each, and prints one table: per scenario and
run, the device's busy time under gpuslice as a fraction of unmanaged (target >= 97%), the
breakdown of grant time gpuslice-bench reports, and for the services their p99 against
max(1.1 x unmanaged, alone + 1 ms) and the trainers' device time against 95% of unmanaged
(docs/performance.md, "Targets"). Exits 0 whatever it measured: a benchmark reports numbers.

  scripts/device-time-check.py [--build DIR] [--duration S] [--runs N] [--report DIR] [SCENARIO...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
SATURATING = ["inference-beside-training", "two-equal-trainers", "four-equal-tenants", "eight-equal-tenants",
              "two-wide-trainers-unlimited"]
# Scenario: (service tenant, trainer tenant), whose tail and device time are checked.
SERVICES = {"latency-standard": ("service", "trainer"),
            "standard-beside-three-process-trainer": ("service", "trainer"),
            "four-ways": ("service", "trainer")}


def scenario_file(name, scratch):
    """The scenario's YAML; two-wide-trainers-unlimited is two-wide-trainers without its limits."""
    if name != "two-wide-trainers-unlimited":
        return name
    with open(os.path.join(ROOT, "bench", "scenarios", "two-wide-trainers.yaml")) as f:
        text = f.read()
    text = text.replace("name: two-wide-trainers", "name: two-wide-trainers-unlimited", 1)
    text = re.sub(r"compute: \{request: 50, limit: 50\}", "compute: {request: 50}", text)
    text = re.sub(r"\ntargets:.*", "\n", text, flags=re.S)  # its targets are about MIG and MPS
    path = os.path.join(scratch, "two-wide-trainers-unlimited.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


def run(bench, scenario, duration, report):
    argv = [bench, scenario, "--modes", "solo,unmanaged,gpuslice", "--duration", str(duration), "--report", report]
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    name = os.path.splitext(os.path.basename(scenario))[0]
    path = os.path.join(report, name, "results.json")
    if not os.path.exists(path):
        sys.exit(f"device-time-check: {name} produced no results (gpuslice-bench exit {done.returncode}):\n"
                 f"{done.stderr[-2000:]}")
    with open(path) as f:
        return json.load(f)


def pct(x):
    return "-" if x is None else f"{100 * x:.1f}%"


def row(name, results):
    modes = results["modes"]
    busy = {m: modes[m]["run"].get("gpu_utilisation") for m in ("unmanaged", "gpuslice") if m in modes}
    ratio = busy["gpuslice"] / busy["unmanaged"] if busy.get("unmanaged") and busy.get("gpuslice") else None
    sched = modes["gpuslice"].get("scheduler") or {}
    cells = [name, pct(busy.get("unmanaged")), pct(busy.get("gpuslice")), pct(ratio),
             pct(sched.get("grant_start_idle")), pct(sched.get("holder_idle")), pct(sched.get("unheld_waiting"))]
    verdicts = []
    if ratio is not None and name in SATURATING:
        verdicts.append("busy " + ("met" if ratio >= 0.97 else "NOT MET"))
    if name in SERVICES:
        service, trainer = SERVICES[name]
        p99 = {m: (modes[m]["tenants"][service].get("latency") or {}).get("p99_us") for m in modes}
        share = {m: modes[m]["tenants"][trainer].get("share") for m in modes}
        bound = max(1.1 * p99["unmanaged"], p99["solo"] + 1000) if p99.get("unmanaged") and p99.get("solo") else None
        cells.append(f"p99 {p99['gpuslice'] / 1e3:.2f} ms (unmanaged {p99['unmanaged'] / 1e3:.2f}, alone "
                     f"{p99['solo'] / 1e3:.2f}, bound {bound / 1e3:.2f})" if bound else "-")
        if bound:
            verdicts.append("p99 " + ("met" if p99["gpuslice"] <= bound else "NOT MET"))
        if name == "four-ways":
            verdicts.append("p99 <= unmanaged " + ("met" if p99["gpuslice"] <= p99["unmanaged"] else "NOT MET"))
        kept = share["gpuslice"] / share["unmanaged"] if share.get("unmanaged") else None
        cells.append(f"trainer {pct(kept)} of unmanaged")
        if kept is not None:
            verdicts.append("trainer " + ("met" if kept >= 0.95 else "NOT MET"))
    else:
        cells += ["", ""]
    cells.append(", ".join(verdicts))
    return cells


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("scenarios", nargs="*", default=SATURATING + list(SERVICES))
    p.add_argument("--build", default=os.environ.get("GPUSLICE_BUILD_DIR", os.path.join(ROOT, "build")))
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--report", help="keep the reports here (default: a temporary folder)")
    args = p.parse_args()
    bench = os.path.join(args.build, "bin", "gpuslice-bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"device-time-check: {bench} not found: build first (cmake --build {args.build})")
    header = ["scenario", "busy unmanaged", "busy gpuslice", "busy / unmanaged", "hand-overs", "holders idle",
              "nobody eligible", "service", "trainer", "targets"]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        report = args.report or scratch
        for name in args.scenarios:
            for i in range(args.runs):
                print(f"device-time-check: {name}, run {i + 1} of {args.runs} ...", file=sys.stderr, flush=True)
                rows.append(row(name, run(bench, scenario_file(name, scratch), args.duration, report)))
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
