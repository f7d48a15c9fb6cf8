"""An `arrival` workload: short-lived processes that start one after another on the GPU, each
launching one kernel and waiting for it, as a tenant arriving at the GPU does.

Each arrival is a `gpuslice-workload compute --kernels 1` of its own; its `elapsed_s` runs from
just before its first launch to the end of the synchronisation after it, so under gpuslice it
includes the wait for the grant and the creation of the tenant's gate. With `new_tenant` every
arrival is a tenant of its own (`<tenant>-<i>`), so the grant must be handed over from the one
that left before. The arrivals' times are the workload's latencies (p50/p99/max_ms targets).

It has WorkloadProcess's interface, so the runner, the sampler and the metrics take it as one.
"""
import json
import os
import subprocess
import threading
import time

from .workloads import stderr_tail


class ArrivalProcess:
    def __init__(self, tenant, workload, index, binary, env, seconds, scratch_dir):
        self.tenant = tenant
        self.workload = workload
        self.label = f"{tenant}/arrival{index}"
        self.stderr_path = os.path.join(scratch_dir, self.label.replace("/", "-") + ".stderr")
        self.binary = binary
        self.env = env
        self.seconds = seconds
        self.pid = None           # the arrival on the GPU now (the last one once all are done)
        self.ready_at = None
        self.finished_at = None
        self.result = None
        self.holding = None
        self.returncode = None
        self.workload_index = 0
        self.killed = False
        self.faulted = None       # arrivals never fault on purpose (see WorkloadProcess)
        self.fault_launched_at = None
        self.argv = None
        self._times_us = []
        self._stop = threading.Event()
        self._thread = None

    def _argv(self, i):
        p = self.workload.params
        return [self.binary, "compute", "--kernels", "1", "--kernel-us", str(p["kernel_us"]), "--depth", "1",
                "--label", f"{self.label}.{i}"]

    def start(self):
        self.ready_at = time.monotonic()  # nothing to prepare: the first arrival starts at once
        self._thread = threading.Thread(target=self._run, name=self.label, daemon=True)
        self._thread.start()

    def _run(self):
        deadline = self.ready_at + self.seconds
        p = self.workload.params
        with open(self.stderr_path, "w") as err:
            for i in range(p["count"]):
                if self._stop.is_set() or time.monotonic() >= deadline:
                    break
                env = dict(self.env)
                if p["new_tenant"] and "GPUSLICE_TENANT" in env:
                    env["GPUSLICE_TENANT"] = f"{self.tenant}-{i}"
                self.argv = self._argv(i)
                proc = subprocess.Popen(self.argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
                self.pid = proc.pid
                out, _ = proc.communicate()
                if proc.returncode != 0:
                    self.returncode = proc.returncode
                    break
                for line in out.splitlines():
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if event.get("event") == "result":
                        self._times_us.append(event["elapsed_s"] * 1e6)
                if p["gap_ms"]:
                    self._stop.wait(p["gap_ms"] / 1000)
        if self.returncode is None:
            self.returncode = 0
        self.result = {"arrivals": len(self._times_us), "elapsed_s": time.monotonic() - self.ready_at}
        self.finished_at = time.monotonic()

    def wait_ready(self, timeout):
        return True

    def running(self):
        return self._thread is not None and self._thread.is_alive()

    def kill(self):
        self._stop.set()

    def terminate(self):
        self._stop.set()

    def failure(self):
        if self.returncode in (0, None):
            return None
        err = stderr_tail(self.stderr_path)
        return f"{self.label} (an arrival exited {self.returncode}): {' '.join(self.argv or [])}" + \
            (f"\n  {err}" if err else "")

    def latencies_us(self):
        return list(self._times_us)

    def busy_at(self, when):
        return 0  # a kernel of 100 µs now and then: nothing worth interpolating on a real GPU
