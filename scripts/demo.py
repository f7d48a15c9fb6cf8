#!/usr/bin/env python3
"""The interference demo: an inference service beside a trainer on one GPU, no sharing layer.

Runs gpuslice-workload processes and reports what each got: the latency tenant's p99 alone and
beside the trainer, each tenant's share of device time (the simulator's ground truth), and a
memory grab that nothing stops. These are the numbers gpuslice's shim is built to change.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def start_workload(binary, args, env):
    """Starts a tenant with --ready-line; returns (process, pid) once its context exists."""
    # stderr goes to a file: reading stdout line by line and then communicate() would lose
    # whatever the line reader had already buffered.
    proc = subprocess.Popen([binary] + args + ["--ready-line"], env=env, stdout=subprocess.PIPE,
                            stderr=tempfile.TemporaryFile(mode="w+"), text=True)
    line = proc.stdout.readline()
    if not line.startswith("{"):
        proc.kill()
        sys.exit(f"demo: {args[0]} tenant did not start: {line.strip()}")
    return proc, json.loads(line)["pid"]


def finish(proc):
    out = proc.stdout.read()
    proc.wait(timeout=300)
    err = ""
    results = [json.loads(l) for l in out.splitlines() if l.startswith("{") and '"result"' in l]
    if proc.returncode != 0 or not results:
        sys.exit(f"demo: tenant '{' '.join(proc.args[1:])}' failed (exit {proc.returncode}): {err.strip()}")
    return results[-1]


def run_workload(binary, args, env):
    proc, _ = start_workload(binary, args, env)
    return finish(proc)


def sim_status(tool, env):
    out = subprocess.run([tool, "status", "--json"], env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def progress(message):
    print(f"  ... {message}", file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each phase")
    parser.add_argument("--real-gpu", action="store_true", help="use the installed NVIDIA driver")
    opts = parser.parse_args()

    bin_dir = os.path.join(opts.build, "bin")
    workload = os.path.join(bin_dir, "gpuslice-workload")
    tool = os.path.join(bin_dir, "gpuslice-sim")
    env = dict(os.environ)
    state = None
    if not opts.real_gpu:
        state = tempfile.mktemp(prefix="gpuslice-demo-", dir="/dev/shm")
        env["LD_LIBRARY_PATH"] = os.path.join(opts.build, "simlib")
        env["GPUSLICE_SIM_STATE"] = state
        env.setdefault("GPUSLICE_SIM_MEMORY", "80Gi")
    secs = str(opts.seconds)
    latency_args = ["latency", "--period-ms", "10", "--kernels-per-request", "3", "--kernel-us", "300",
                    "--duration", secs, "--label", "inference"]
    trainer_args = ["compute", "--kernel-us", "8000", "--depth", "4", "--duration", secs, "--label", "trainer"]

    where = "a real GPU" if opts.real_gpu else "the simulated GPU (80 GiB, 2 ms hardware timeslice)"
    print(f"gpuslice demo on {where}: an inference service beside a trainer, no sharing layer")
    progress(f"phase 1/3: inference service alone ({secs} s)")
    solo = run_workload(workload, latency_args, env)

    progress(f"phase 2/3: inference service beside the trainer ({secs} s)")
    trainer, trainer_pid = start_workload(workload, trainer_args, env)
    service, service_pid = start_workload(workload, latency_args, env)
    shared = finish(service)
    finish(trainer)

    shares = {}
    if state:
        procs = sim_status(tool, env)["devices"][0]["processes"]
        busy = {p["pid"]: p["busy_ns"] for p in procs if p["pid"] in (trainer_pid, service_pid)}
        total_busy = sum(busy.values()) or 1
        shares = {pid: b / total_busy for pid, b in busy.items()}

    progress("phase 3/3: the trainer holds 60 GiB; the inference service asks for 32 GiB")
    holder, _ = start_workload(workload, ["memory", "--chunk", "60Gi", "--hold", "3", "--label", "trainer"], env)
    grab = run_workload(workload, ["memory", "--chunk", "32Gi", "--label", "inference"], env)
    finish(holder)

    def ms(us):
        return f"{us / 1000:.2f}"

    share_of = lambda pid: f"{shares[pid]:.0%}" if pid in shares else "n/a"
    inflation = shared["p99_us"] / max(solo["p99_us"], 1e-9)
    print()
    print(f"{'tenant':<12}{'mode':<12}{'p50 ms':>9}{'p99 ms':>9}{'p99 vs alone':>14}{'GPU time share':>16}")
    print(f"{'inference':<12}{'alone':<12}{ms(solo['p50_us']):>9}{ms(solo['p99_us']):>9}{'1.00x':>14}{'':>16}")
    print(f"{'inference':<12}{'unmanaged':<12}{ms(shared['p50_us']):>9}{ms(shared['p99_us']):>9}"
          f"{inflation:>13.2f}x{share_of(service_pid):>16}")
    print(f"{'trainer':<12}{'unmanaged':<12}{'':>9}{'':>9}{'':>14}{share_of(trainer_pid):>16}")
    print()
    verdict = "granted" if grab["allocated"] else "refused"
    print(f"memory: with the trainer holding 60 GiB, the service's 32 GiB request was {verdict} "
          f"({grab['mem_before']['free'] / 2**30:.0f} GiB were free); no quota reserves memory for either tenant.")
    print("No sharing layer: the trainer's long kernels inflate the service's tail latency, shares follow")
    print("whoever submits more, and either tenant can take the other's memory. gpuslice's shim bounds both.")
    if state and os.path.exists(state):
        os.unlink(state)

if __name__ == "__main__":
    main()
