"""The device over time: every process's busy time and memory, sampled every interval.

On the simulated GPU the figures are the simulator's ground truth (`gpuslice-sim status
--json`), never what the workloads say about themselves, counted in SM-time (`sm_time`) so that
time-sliced, MPS and MIG runs are measured in the same unit. A real GPU has no per-process busy
counter, so there the busy time is what each workload reports having completed (kernels ×
kernel length, from its progress lines, interpolated to the sample's time) and memory is
nvidia-smi's per-process figure. That estimate is only as honest as the kernels: a spin kernel
that is switched out mid-spin by the hardware's time-slicing still ends on time, so unmanaged
shares on a real GPU are overstated.
"""
import dataclasses
import json
import subprocess
import threading
import time


@dataclasses.dataclass
class Sample:
    t: float                # seconds since the run's start
    device_busy_ns: int     # cumulative
    procs: dict             # pid -> (cumulative busy ns, memory bytes now)


class SimulatorSource:
    def __init__(self, sim_tool, state_path, env):
        self.argv = [sim_tool, "--state", state_path, "status", "--json"]
        self.env = env

    def __call__(self, processes):
        try:
            out = subprocess.run(self.argv, env=self.env, capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return None
        if out.returncode != 0:
            return None  # no process has created the devices yet
        return sm_time(json.loads(out.stdout)["devices"][0])


def sm_time(gpu):
    """(GPU busy ns, {pid: (busy ns, memory)}) in the GPU's SM-time: busy time × the SMs it
    occupied ÷ the GPU's SMs. Time-sliced, the running context holds every SM (factor 1); under
    MPS the simulator already counts a client's SM-time; in MIG mode a process's busy time is on
    its instance, which holds the instance's SMs only, and SMs outside every instance never work."""
    units = gpu.get("mig_instances") or [gpu]
    device_busy, procs = 0, {}
    for unit in units:
        factor = unit["sm_count"] / gpu["sm_count"] if unit is not gpu else 1.0
        device_busy += unit["busy_ns"] * factor
        for p in unit["processes"]:
            busy, memory = procs.get(p["pid"], (0, 0))
            procs[p["pid"]] = (busy + p["busy_ns"] * factor, memory + p["memory_used"])
    return device_busy, procs


class RealGpuSource:
    """Memory from nvidia-smi now; busy time filled in after the run (`fill_busy`), from the
    workloads' progress reports interpolated to each sample's time."""

    def __call__(self, processes):
        memory = {}
        try:
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=10).stdout
            for line in out.splitlines():
                pid, mib = (x.strip() for x in line.split(","))
                if pid.isdigit() and mib.isdigit():
                    memory[int(pid)] = int(mib) << 20
        except (OSError, subprocess.SubprocessError, ValueError):
            pass
        return 0, {p.pid: (0, memory.get(p.pid, 0)) for p in processes if p.pid}


def fill_busy(samples, processes, t0):
    """Gives real-GPU samples each process's reported busy time at the sample's time."""
    for sample in samples:
        total = 0
        for p in processes:
            if p.pid is None:
                continue
            busy = int(p.busy_at(t0 + sample.t))
            total += busy
            sample.procs[p.pid] = (busy, sample.procs.get(p.pid, (0, 0))[1])
        sample.device_busy_ns = total


class Sampler:
    """Samples `source` every `interval` seconds on a thread of its own, from start() to stop()."""

    def __init__(self, source, interval, processes, t0):
        self.source = source
        self.interval = interval
        self.processes = processes  # the list grows as delayed workloads start
        self.t0 = t0
        self.samples = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sampler", daemon=True)

    def take(self):
        before = time.monotonic()
        taken = self.source(list(self.processes))
        if taken is not None:
            t = (before + time.monotonic()) / 2 - self.t0
            self.samples.append(Sample(t=t, device_busy_ns=taken[0], procs=taken[1]))

    def _loop(self):
        deadline = time.monotonic()
        while not self._stop.is_set():
            self.take()
            deadline += self.interval
            self._stop.wait(max(0.0, deadline - time.monotonic()))

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.take()
