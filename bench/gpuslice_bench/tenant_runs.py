"""Runs a few gpuslice-workload processes side by side on one fresh simulated GPU, with or without
gpuslice, and collects their result lines and the driver calls each made (the simulated driver's
GPUSLICE_SIM_CALL_COUNTS): what the launch-bound and latency-sweep benchmarks are built from.
"""
import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import time


@dataclasses.dataclass
class Tenant:
    name: str
    argv: list                  # gpuslice-workload's arguments (without --label)
    request: int = 0            # GPUSLICE_COMPUTE_REQUEST (0: not set)
    limit: int = 0              # GPUSLICE_COMPUTE_LIMIT (0: not set)
    compute_class: str = ""     # GPUSLICE_COMPUTE_CLASS ("": not set)
    processes: int = 1


@dataclasses.dataclass
class Run:
    results: dict               # tenant name -> list of result lines (one per process)
    calls: dict                 # entry point -> calls, over every process
    seconds: float


class RunError(RuntimeError):
    pass


def _env(paths, state_file, state_dir, counts, costs, tenant, managed, real_gpu, kernel_log=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSLICE_") and k != "LD_PRELOAD"}
    if not real_gpu:
        env.update(LD_LIBRARY_PATH=paths.simlib, GPUSLICE_SIM_STATE=state_file, GPUSLICE_SIM_CALL_COUNTS=counts,
                   GPUSLICE_SIM_CALL_COSTS=costs)
        if kernel_log:
            env["GPUSLICE_SIM_KERNEL_LOG"] = kernel_log
    if managed:
        env.update(LD_PRELOAD=paths.shim, GPUSLICE_STATE_DIR=state_dir, GPUSLICE_TENANT=tenant.name)
        if tenant.request:
            env["GPUSLICE_COMPUTE_REQUEST"] = str(tenant.request)
        if tenant.limit:
            env["GPUSLICE_COMPUTE_LIMIT"] = str(tenant.limit)
        if tenant.compute_class:
            env["GPUSLICE_COMPUTE_CLASS"] = tenant.compute_class
    return env


def run(paths, tenants, managed, costs="default", timeout=600, real_gpu=False, kernel_log=None):
    """Starts every process of every tenant at once and waits for all; raises RunError when one
    fails (its stderr in the message). On a real GPU nothing counts the calls (`calls` is empty).
    `kernel_log`: a file the simulated device's kernels are logged to (GPUSLICE_SIM_KERNEL_LOG)."""
    scratch = tempfile.mkdtemp(prefix="gpuslice-bench-")
    state_file = "/dev/shm/" + os.path.basename(scratch)
    counts = os.path.join(scratch, "calls.jsonl")
    state_dir = os.path.join(scratch, "state")
    os.makedirs(state_dir)
    procs = []
    start = time.monotonic()
    try:
        for t in tenants:
            env = _env(paths, state_file, state_dir, counts, costs, t, managed, real_gpu, kernel_log)
            for i in range(t.processes):
                err = open(os.path.join(scratch, f"{t.name}-{i}.stderr"), "w")
                p = subprocess.Popen([paths.workload] + t.argv + ["--label", t.name], env=env, stdout=subprocess.PIPE,
                                     stderr=err, text=True)
                procs.append((t, p, err))
        results = {t.name: [] for t in tenants}
        for t, p, err in procs:
            out, _ = p.communicate(timeout=timeout)
            err.close()
            if p.returncode != 0:
                with open(err.name) as f:
                    raise RunError(f"{t.name}: gpuslice-workload exited {p.returncode}: {f.read().strip()[-500:]}")
            lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            result = [line for line in lines if line.get("event") == "result"]
            if not result:
                raise RunError(f"{t.name}: no result line")
            results[t.name].append(result[-1])
        calls = {}
        if os.path.exists(counts):
            with open(counts) as f:
                for line in f:
                    d = json.loads(line)
                    if d.get("library") != "cuda":
                        continue
                    for name, n in d["calls"].items():
                        calls[name] = calls.get(name, 0) + n
        return Run(results=results, calls=calls, seconds=time.monotonic() - start)
    finally:
        for _, p, err in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            err.close()
        shutil.rmtree(scratch, ignore_errors=True)
        try:
            os.unlink(state_file)
        except OSError:
            pass


def launches(calls):
    """Kernel and graph launches among `calls`."""
    return sum(n for name, n in calls.items() if name.startswith(("cuLaunch", "cuGraphLaunch")))


def other_calls_per_launch(calls):
    """Every other driver call, per launch."""
    n = launches(calls)
    return (sum(calls.values()) - n) / n if n else 0.0
