"""One gpuslice-workload process of a tenant: its command line, its output as it comes, its end.

Output is read line by line on a thread of its own, so that `ready` and `result` are timed when
they are printed (the sampler's windows are cut by them) rather than when someone asks.
"""
import json
import os
import subprocess
import threading
import time

from .quantities import parse_bytes


def command_line(binary, workload, seconds, report_interval, label, latencies_path):
    """gpuslice-workload's argv for `workload` running `seconds` (memory: holding that long)."""
    p = workload.params
    if workload.kind == "compute":
        args = ["compute", "--kernel-us", str(p["kernel_us"]), "--depth", str(p["depth"]), "--duration", f"{seconds:.3f}"]
        if p.get("fault_at") is not None:
            args += ["--fault-after", f"{p['fault_at']:.3f}"]
    elif workload.kind == "latency":
        args = ["latency", "--period-ms", f"{p['period_ms']:g}", "--kernels-per-request", str(p["kernels_per_request"]),
                "--kernel-us", str(p["kernel_us"]), "--duration", f"{seconds:.3f}", "--latencies-file", latencies_path]
    else:
        hold = p["hold"] if p["hold"] is not None else seconds
        args = ["memory", "--api", p["api"], "--chunk", str(parse_bytes(p["chunk"])), "--count", str(p["count"]),
                "--hold", f"{hold:.3f}"] + (["--touch"] if p["touch"] else [])
    if p.get("width", "narrow") != "narrow":  # compute, latency
        args += ["--width", p["width"]]
    args += ["--label", label, "--ready-line"]
    if workload.kind != "memory":
        args += ["--report-interval", f"{report_interval:g}"]
    return [binary] + args


def stderr_tail(path):
    """The end of a process's stderr file, for a failure's message ("" when there is none)."""
    try:
        with open(path) as f:
            return f.read().strip()[-2000:]
    except OSError:
        return ""


class WorkloadProcess:
    def __init__(self, tenant, workload, index, binary, env, seconds, report_interval, scratch_dir):
        self.tenant = tenant
        self.workload = workload
        self.label = f"{tenant}/{workload.kind}{index}"
        safe = self.label.replace("/", "-")
        self.latencies_path = os.path.join(scratch_dir, safe + ".latencies") if workload.kind == "latency" else None
        self.stderr_path = os.path.join(scratch_dir, safe + ".stderr")
        self.argv = command_line(binary, workload, seconds, report_interval, self.label, self.latencies_path)
        self.env = env
        self.pid = None
        self.ready_at = None      # time.monotonic() of the ready line
        self.device_name = None   # the device its context is on, as the driver named it
        self.finished_at = None   # of the result line (or of the exit, if there was none)
        self.result = None
        self.holding = None
        self.last_progress = None
        self.busy_points = []     # (monotonic time, cumulative kernel ns the workload reports done)
        self.returncode = None
        self.workload_index = 0   # which of the tenant's workloads (set by the runner)
        self.killed = False       # SIGKILLed by a scenario's event: no result is expected
        self.fault_launched_at = None  # monotonic time of its "fault" line (compute --fault-after)
        self.faulted = None       # "own": ended by its own fault; "other": by another process's (MPS)
        self._proc = None
        self._reader = None
        self._ready = threading.Event()

    def start(self):
        with open(self.stderr_path, "w") as err:
            self._proc = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.PIPE, stderr=err, text=True,
                                          start_new_session=True)
        self.pid = self._proc.pid
        self._reader = threading.Thread(target=self._read, name=self.label, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self._proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            now = time.monotonic()
            kind = event.get("event")
            if kind == "ready":
                self.ready_at = now
                self.device_name = event.get("device_name")
                self._ready.set()
            elif kind == "progress":
                self.last_progress = event
                self._add_busy_point(event)
            elif kind == "fault":
                self.fault_launched_at = now
            elif kind == "holding":
                self.holding = event
            elif kind == "result":
                self.result = event
                self.finished_at = now
                self._add_busy_point(event)
        self._proc.wait()
        self.returncode = self._proc.returncode
        if self.finished_at is None:
            self.finished_at = time.monotonic()
        self._ready.set()  # a process that died before its ready line wakes whoever waits for it

    def wait_ready(self, timeout):
        """True once the device context exists; False if the process ended or `timeout` passed first."""
        return self._ready.wait(timeout) and self.ready_at is not None

    def wait(self, timeout):
        self._reader.join(timeout)
        return not self._reader.is_alive()

    def running(self):
        return self._reader is not None and self._reader.is_alive()

    def kill(self):
        if self._proc and self._proc.poll() is None:
            self._proc.kill()

    def terminate(self):
        """Ends the run early; the workload still prints its result line."""
        if self._proc and self._proc.poll() is None:
            self._proc.terminate()

    def failure(self):
        """None for a clean run; else one paragraph saying what went wrong."""
        if self.returncode == 0 and self.result is not None:
            return None
        err = stderr_tail(self.stderr_path)
        how = f"exit {self.returncode}" if self.returncode is not None and self.returncode >= 0 else \
            f"signal {-self.returncode}" if self.returncode is not None else "did not finish"
        return f"{self.label} ({how}): {' '.join(self.argv)}" + (f"\n  {err}" if err else "")

    def ended_by_fault(self):
        """Whether it ended with CUDA_ERROR_ILLEGAL_ADDRESS (a broken context), without a result."""
        return self.returncode not in (None, 0) and self.result is None and \
            "CUDA_ERROR_ILLEGAL_ADDRESS" in stderr_tail(self.stderr_path)

    def partial_result(self):
        """For a process a fault ended: a compute process's throughput up to its last progress
        line, a memory process's allocations from its holding line."""
        if self.workload.kind == "memory" and self.holding:
            return dict(self.holding, count=self.workload.params["count"],
                        chunk_bytes=parse_bytes(self.workload.params["chunk"]), partial=True)
        p = self.last_progress
        if self.workload.kind == "latency" and self.ready_at is not None:
            # Its latencies file holds every request until the fault (the workload writes it then).
            return {"requests": len(self.latencies_us()), "elapsed_s": max(self.finished_at - self.ready_at, 1e-9),
                    "missed_periods": (p or {}).get("missed_periods", 0), "partial": True}
        if self.workload.kind != "compute" or not p or p.get("elapsed_s", 0) <= 0:
            return None
        rate = p["kernels"] / p["elapsed_s"]
        return {"kernels": p["kernels"], "elapsed_s": p["elapsed_s"], "kernels_per_s": rate, "blocks": p.get("blocks", 1),
                "busy_fraction": rate * self.workload.params["kernel_us"] * 1e-6, "partial": True}

    def latencies_us(self):
        if not self.latencies_path or not os.path.exists(self.latencies_path):
            return []
        with open(self.latencies_path) as f:
            return [float(x) for x in f.read().split()]

    def _reported_busy_ns(self, event):
        """Kernel time the workload reports having completed (the real GPU has no ground truth here)."""
        p = self.workload.params
        if self.workload.kind == "compute":
            return event.get("kernels", 0) * p["kernel_us"] * 1000
        if self.workload.kind == "latency":
            return event.get("requests", 0) * p["kernels_per_request"] * p["kernel_us"] * 1000
        return 0

    def _add_busy_point(self, event):
        if self.ready_at is not None and "elapsed_s" in event:
            # The workload's clock starts just after its ready line.
            self.busy_points.append((self.ready_at + event["elapsed_s"], self._reported_busy_ns(event)))

    def busy_at(self, when):
        """Reported kernel time done by monotonic time `when`, interpolated between reports."""
        before = (self.ready_at or when, 0)
        for point in self.busy_points:
            if point[0] >= when:
                span = point[0] - before[0]
                if span <= 0:
                    return point[1]
                return before[1] + (point[1] - before[1]) * (when - before[0]) / span
            before = point
        return before[1]
