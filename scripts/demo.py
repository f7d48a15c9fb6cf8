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


def run_workload(binary, args, env):
    proc = subprocess.run([binary] + args, env=env, capture_output=True, text=True, timeout=300)
    lines = [json.loads(l) for l in proc.stdout.splitlines() if l.startswith("{")]
    results = [l for l in lines if l.get("event") == "result"]
    if proc.returncode != 0 or not results:
        sys.exit(f"demo: {' '.join(args[:1])} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return results[-1]


def start_workload(binary, args, env):
    return subprocess.Popen([binary] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc):
    out, err = proc.communicate(timeout=300)
    results = [json.loads(l) for l in out.splitlines() if l.startswith("{") and '"result"' in l]
    if proc.returncode != 0 or not results:
        sys.exit(f"demo: a tenant failed (exit {proc.returncode}): {err.strip()}")
    return results[-1]


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
    trainer = start_workload(workload, trainer_args, env)
    time.sleep(0.3)
    shared = run_workload(workload, latency_args, env)
    trainer_result = finish(trainer)

    shares = {}
    if state:
        status = sim_status(tool, env)
        procs = status["devices"][0]["processes"]
        total_busy = sum(p["busy_ns"] for p in procs) or 1
        shares = {p["pid"]: p["busy_ns"] / total_busy for p in procs}

    progress("phase 3/3: the trainer holds 60 GiB; the inference service asks for 32 GiB")
    holder = start_workload(workload, ["memory", "--chunk", "60Gi", "--hold", "3", "--ready-line", "--label", "trainer"],
                            env)
    holder.stdout.readline()  # the ready line
    grab = run_workload(workload, ["memory", "--chunk", "32Gi", "--label", "inference"], env)
    finish(holder)

    def p99(result):
        return result["latency_us"]["p99"] if "latency_us" in result else result.get("p99_us")

    print()
    print(f"{'tenant':<12}{'mode':<12}{'p50 (ms)':>10}{'p99 (ms)':>10}{'p99 x solo':>12}{'GPU share':>11}")
    lat_solo, lat_shared = solo["latency_us"], shared["latency_us"]
    print(f"{'inference':<12}{'alone':<12}{lat_solo['p50'] / 1000:>10.2f}{lat_solo['p99'] / 1000:>10.2f}{1.0:>12.2f}{'':>11}")
    inflation = lat_shared["p99"] / max(lat_solo["p99"], 1e-9)
    inf_share = shares.get(shared.get("pid"), float("nan"))
    trn_share = shares.get(trainer_result.get("pid"), float("nan"))
    print(f"{'inference':<12}{'unmanaged':<12}{lat_shared['p50'] / 1000:>10.2f}{lat_shared['p99'] / 1000:>10.2f}"
          f"{inflation:>12.2f}{inf_share:>10.0%} ")
    print(f"{'trainer':<12}{'unmanaged':<12}{'':>10}{'':>10}{'':>12}{trn_share:>10.0%} ")
    print()
    print(f"memory: the inference service's 32 GiB request was {'granted' if grab['succeeded'] else 'refused'}"
          f" ({grab['succeeded']} of {grab['requested']} allocations; free before: "
          f"{grab['mem_info_before']['free'] / 2**30:.0f} GiB) - no quota protects either tenant.")
    print("Without a sharing layer the trainer's long kernels inflate the service's tail latency and either")
    print("tenant can take the other's memory. gpuslice's shim (LD_PRELOAD) is what bounds both.")
    if state and os.path.exists(state):
        os.unlink(state)


if __name__ == "__main__":
    main()
