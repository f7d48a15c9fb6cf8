"""One run: some of a scenario's tenants together on a fresh GPU, in one mode, for the duration.

Modes differ only in each process's environment:
  solo, unmanaged  the workload alone, no sharing layer (the hardware's own time-slicing);
  gpuslice         LD_PRELOAD=libgpuslice.so with the tenant's name, quota, request and limit,
                   over a broker state directory of the run's own;
  mps              no shim; the limits in the CUDA_MPS_* client variables, every process a client
                   of an MPS server: the simulator's (GPUSLICE_SIM_MPS=1) or a private daemon;
  mig              no shim; the GPU in MIG mode (GPUSLICE_SIM_MIG), each tenant's processes in
                   its own instance (CUDA_VISIBLE_DEVICES=MIG-<uuid>), simulated GPU only.
On the simulated GPU every run gets its own simulator state file (a new, empty device), of the
scenario's model (GPUSLICE_SIM_MODEL) in every mode, so that every mode has the same SMs.
"""
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from .arrivals import ArrivalProcess
from .machine import clean_environment
from .mig import layout_variable
from .mps import MpsDaemon, client_limits
from .sampler import RealGpuSource, Sampler, SimulatorSource, fill_busy
from .workloads import WorkloadProcess

READY_TIMEOUT_S = 60
FINISH_GRACE_S = 60


class RunError(Exception):
    """A run whose processes failed; str() says which and why."""


@dataclasses.dataclass
class ProcessRecord:
    tenant: str
    kind: str
    label: str
    pid: int
    workload: object     # scenario.Workload
    ready_at: float      # seconds from the run's start (≤ 0 for those started with it)
    finished_at: float
    result: dict
    holding: dict
    latencies_us: list
    killed: bool = False  # by one of the scenario's events (expected to end without a result)
    faulted: str = None   # "own": its planned fault ended it; "other": another process's fault did


@dataclasses.dataclass
class RunRecord:
    mode: str
    tenants: list        # names
    duration: float
    samples: list        # sampler.Sample
    processes: list      # ProcessRecord
    wall_s: float
    events: list = dataclasses.field(default_factory=list)  # {at_s, signal, tenant, pids} as sent
    # gpuslice runs: the scheduler's own account of the device's time (gpuslicectl status --json,
    # per GPU: grants and grant_time_ns), read once the tenants have exited; None elsewhere.
    scheduler: object = None


@dataclasses.dataclass
class RunContext:
    paths: object        # machine.Paths
    simulated: bool
    gpu_memory: int      # bytes
    progress: object     # progress.Progress
    keep_scratch: bool = False
    # The devices the workloads' contexts were on (their ready lines): what the report is
    # labelled with, rather than what was asked for.
    devices_seen: set = dataclasses.field(default_factory=set)


_counter = 0


def _sim_state_path():
    global _counter
    _counter += 1
    return f"/dev/shm/gpuslice-bench-{os.getpid()}-{_counter}"


def _tenant_env(base, mode, tenant, state_dir, ctx, mps, instances):
    env = dict(base)
    if mode == "gpuslice":
        env["LD_PRELOAD"] = ctx.paths.shim
        env["GPUSLICE_STATE_DIR"] = state_dir
        env["GPUSLICE_TENANT"] = tenant.name
        if tenant.memory_quota is not None:
            env["GPUSLICE_MEMORY_LIMIT"] = tenant.memory_quota
        if tenant.request is not None:
            env["GPUSLICE_COMPUTE_REQUEST"] = str(tenant.request)
        if tenant.limit is not None:
            env["GPUSLICE_COMPUTE_LIMIT"] = str(tenant.limit)
        if tenant.compute_class is not None:
            env["GPUSLICE_COMPUTE_CLASS"] = tenant.compute_class
    elif mode == "mps":
        env.update(mps.client_env(tenant, ctx.gpu_memory) if mps else client_limits(tenant, ctx.gpu_memory))
    elif mode == "mig":
        env["CUDA_VISIBLE_DEVICES"] = instances[tenant.name]
    return env


def _mig_instances(scenario, ctx, base, state_path):
    """{tenant: MIG-uuid}: creates the simulated GPU in MIG mode (one short workload does) and reads
    the instances' UUIDs, which the simulator lists in GPUSLICE_SIM_MIG's order."""
    probe = subprocess.run([ctx.paths.workload, "compute", "--kernels", "1", "--kernel-us", "1", "--depth", "1"],
                           env=base, capture_output=True, text=True, timeout=READY_TIMEOUT_S)
    if probe.returncode != 0:
        raise RunError(f"mode mig: the simulator did not create GPUSLICE_SIM_MIG={base['GPUSLICE_SIM_MIG']}: "
                       f"{probe.stderr.strip()}")
    status = subprocess.run([ctx.paths.sim_tool, "--state", state_path, "status", "--json"], env=base,
                            capture_output=True, text=True, timeout=30)
    units = json.loads(status.stdout)["devices"][0]["mig_instances"] if status.returncode == 0 else []
    if len(units) != len(scenario.mig_layout):
        raise RunError(f"mode mig: expected {len(scenario.mig_layout)} MIG instances, the simulator has "
                       f"{len(units)}: {status.stderr.strip()}")
    return {name: unit["uuid"] for (name, _), unit in zip(scenario.mig_layout, units)}


def run(scenario, mode, tenants, ctx, label):
    """Runs `tenants` (scenario.Tenant) together in `mode`; returns a RunRecord or raises RunError."""
    scratch = tempfile.mkdtemp(prefix=f"gpuslice-bench-{scenario.name}-{mode}-")
    base = clean_environment()
    state_path = None
    if ctx.simulated:
        state_path = _sim_state_path()
        base["LD_LIBRARY_PATH"] = ctx.paths.simlib + (":" + base["LD_LIBRARY_PATH"] if base.get("LD_LIBRARY_PATH") else "")
        base["GPUSLICE_SIM_STATE"] = state_path
        base["GPUSLICE_SIM_MEMORY"] = str(ctx.gpu_memory)
        if scenario.timeslice_us:
            base["GPUSLICE_SIM_TIMESLICE_US"] = str(scenario.timeslice_us)
        if scenario.model:
            base["GPUSLICE_SIM_MODEL"] = scenario.model
        if mode == "mps":
            base["GPUSLICE_SIM_MPS"] = "1"
        if mode == "mig":
            base["GPUSLICE_SIM_MIG"] = layout_variable(scenario.mig_layout)
    state_dir = os.path.join(scratch, "gpuslice-state")
    os.makedirs(state_dir, mode=0o700)
    mps = MpsDaemon(scratch) if mode == "mps" and not ctx.simulated else None
    processes = []
    # On a real GPU the progress lines are the only busy figures: report often enough to interpolate.
    report_interval = scenario.sample_interval if ctx.simulated else max(0.05, scenario.sample_interval / 4)
    try:
        if mps:
            mps.start(base)
        instances = _mig_instances(scenario, ctx, base, state_path) if mode == "mig" else None
        for tenant in tenants:
            env = _tenant_env(base, mode, tenant, state_dir, ctx, mps, instances)
            index = 0
            for workload_index, workload in enumerate(tenant.workloads):
                for _ in range(workload.processes):
                    # A process started long before the last one is ready (many processes on a
                    # busy machine) must not end early: each may run READY_TIMEOUT_S longer and
                    # is stopped with SIGTERM at the run's end (_execute).
                    seconds = scenario.duration - workload.start + READY_TIMEOUT_S
                    if workload.kind == "arrival":
                        processes.append(ArrivalProcess(tenant.name, workload, index, ctx.paths.workload, env,
                                                        seconds, scratch))
                    else:
                        processes.append(WorkloadProcess(tenant.name, workload, index, ctx.paths.workload, env,
                                                         seconds, report_interval, scratch))
                    processes[-1].workload_index = workload_index  # what an event's `workload` names
                    index += 1
        record = _execute(scenario, mode, tenants, processes, ctx, base, state_path, label, state_dir)
        return record
    finally:
        for p in processes:
            p.kill()
        if mps:
            mps.stop(base)
        if state_path:
            subprocess.run([ctx.paths.sim_tool, "--state", state_path, "reset"], env=base, capture_output=True)
            if os.path.exists(state_path):
                os.unlink(state_path)
        if not ctx.keep_scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _fail(processes, what):
    failures = [f for f in (p.failure() for p in processes if p.returncode is not None) if f]
    for p in processes:
        p.kill()
    raise RunError(what + ("\n" + "\n".join(failures) if failures else ""))


def _wait_ready(starting, processes, mode, ctx):
    """Returns once every process in `starting` has its context; fails at once, with the process's
    own message, when one exits before that (a missing driver, a bad setting), rather than
    waiting out the others' timeout."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        for p in starting:
            if p.ready_at is None and not p.running() and p.returncode is not None:
                _fail(processes, f"mode {mode}: {p.label} exited before its device context existed")
        if all(p.ready_at is not None for p in starting):
            break
        if time.monotonic() > deadline:
            late = ", ".join(p.label for p in starting if p.ready_at is None)
            _fail(processes, f"mode {mode}: {late} did not become ready within {READY_TIMEOUT_S} s")
        time.sleep(0.02)
    for p in starting:
        if getattr(p, "device_name", None):  # arrivals are many short processes, named by none
            ctx.devices_seen.add(p.device_name)


def _set_quantum(quantum_ms, ctx, base, state_dir, processes):
    """gpuslicectl set --quantum, once the tenants' processes have brought the GPU into the broker."""
    argv = [ctx.paths.bin("gpuslicectl"), "set", "--gpu", "all", "--quantum", f"{quantum_ms:g}ms"]
    try:
        out = subprocess.run(argv, env=dict(base, GPUSLICE_STATE_DIR=state_dir), capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        _fail(processes, f"{' '.join(argv)}: {e}")
    if out.returncode != 0:
        _fail(processes, f"{' '.join(argv)} failed (exit {out.returncode}): {out.stderr.strip()}")


def _execute(scenario, mode, tenants, processes, ctx, base, state_path, label, state_dir):
    started = time.monotonic()
    now_ones = [p for p in processes if p.workload.start == 0]
    later = sorted((p for p in processes if p.workload.start > 0), key=lambda p: p.workload.start)
    ctx.progress.phase(label, scenario.duration)
    for p in now_ones:
        p.start()
    _wait_ready(now_ones, processes, mode, ctx)
    if mode == "gpuslice" and scenario.quantum_ms:
        _set_quantum(scenario.quantum_ms, ctx, base, state_dir, processes)
    t0 = time.monotonic()
    ctx.progress.phase(label, scenario.duration)
    source = SimulatorSource(ctx.paths.sim_tool, state_path, base) if ctx.simulated else RealGpuSource()
    live = list(now_ones)
    sampler = Sampler(source, scenario.sample_interval, live, t0)
    sampler.start()
    deadline = t0 + scenario.duration + FINISH_GRACE_S
    # The scenario's signals, in every mode but solo (the undisturbed baseline).
    names = {t.name for t in tenants}
    pending = sorted((e for e in scenario.events if e.tenant in names and mode != "solo"), key=lambda e: e.at)
    sent, ended = [], False
    try:
        while True:
            now = time.monotonic()
            while later and now - t0 >= later[0].workload.start:
                p = later.pop(0)
                p.start()
                live.append(p)
            while pending and now - t0 >= pending[0].at:
                sent.append(_send(pending.pop(0), processes, now - t0))
            if now - t0 >= scenario.duration and not ended:
                ended = True
                for p in live:
                    p.terminate()  # the workload prints its result line and exits
            if not later and not any(p.running() for p in live):
                break
            if now > deadline:
                stuck = ", ".join(f"{p.label} (pid {p.pid})" for p in live if p.running())
                _fail(processes, f"mode {mode}: still running {FINISH_GRACE_S} s after the scenario's duration: {stuck}")
            _classify_faults(live)
            failed = [p for p in live if not p.running() and not p.killed and not p.faulted and p.failure()]
            if failed:
                _fail(processes, f"mode {mode}: a tenant process failed")
            time.sleep(0.05)
    finally:
        sampler.stop()
    if not ctx.simulated:
        fill_busy(sampler.samples, processes, t0)
    _classify_faults(processes)
    records = [ProcessRecord(tenant=p.tenant, kind=p.workload.kind, label=p.label, pid=p.pid, workload=p.workload,
                             ready_at=(p.ready_at - t0) if p.ready_at else None, finished_at=p.finished_at - t0,
                             result=p.result or (p.partial_result() if p.faulted else None), holding=p.holding,
                             latencies_us=p.latencies_us(), killed=p.killed, faulted=p.faulted)
               for p in processes]
    scheduler = _scheduler_account(ctx, base, state_dir) if mode == "gpuslice" else None
    return RunRecord(mode=mode, tenants=[t.name for t in tenants], duration=scenario.duration,
                     samples=sampler.samples, processes=records, wall_s=time.monotonic() - started, events=sent,
                     scheduler=scheduler)


def _scheduler_account(ctx, base, state_dir):
    """Per GPU the grants made and where the device's time went at hand-overs, from gpuslicectl
    status --json (docs/performance.md, "Where the device's time goes"); None if it cannot be read."""
    argv = [ctx.paths.bin("gpuslicectl"), "status", "--json"]
    try:
        out = subprocess.run(argv, env=dict(base, GPUSLICE_STATE_DIR=state_dir), capture_output=True, text=True,
                             timeout=30)
        status = json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        status = None
    if not status:
        return None
    return [{"uuid": g.get("uuid"), "grants": g.get("grants", 0), "grant_time_ns": g.get("grant_time_ns", {})}
            for g in status.get("gpus", [])]


def _classify_faults(processes):
    """In a run with a planned fault (a workload's `fault_at`), marks the processes that ended with
    CUDA_ERROR_ILLEGAL_ADDRESS: "own" for the one that launched the faulting kernel, "other" for
    those another's fault reached (under MPS, every client of the GPU). Neither is a failed run:
    that is what the scenario measures. Elsewhere that error is a failure like any other."""
    planned = lambda p: p.workload.params.get("fault_at") is not None
    if not any(planned(p) for p in processes):
        return
    for p in processes:
        if p.faulted is None and not p.running() and getattr(p, "ended_by_fault", lambda: False)():
            p.faulted = "own" if planned(p) else "other"


def _send(event, processes, at):
    """Sends `event`'s signal to the processes it selects; returns what was sent, and when."""
    chosen = [p for p in processes if p.tenant == event.tenant and p.pid is not None and p.returncode is None
              and (event.workload is None or p.workload_index == event.workload)]
    if event.processes is not None:
        chosen = chosen[:event.processes]
    for p in chosen:
        if event.signal == "KILL":
            p.killed = True  # before the signal, so the run does not take its end for a failure
        try:
            os.kill(p.pid, getattr(signal, "SIG" + event.signal))
        except ProcessLookupError:
            pass
    return {"at_s": round(at, 4), "signal": event.signal, "tenant": event.tenant, "workload": event.workload,
            "pids": [p.pid for p in chosen]}
