#!/usr/bin/env python3
"""Where a simulated device's time went: its busy and idle time, and the idle gaps between kernels
by hand-over, from the log of kernels the simulated driver writes (GPUSLICE_SIM_KERNEL_LOG).

  scripts/sim-kernel-log.py LOG [--skip-s S] [--label PID=NAME ...]

LOG is the JSON-lines file the processes appended to (docs/simulator.md, "The kernel log"). For
each device: each process's device time, the device's idle time, and every idle gap between two
stretches sorted by who ran before and after it — the same process again, or another process (a
hand-over) — with their count, total, median and 90th percentile. A gap is judged from the end
of all the work before it, so the idle time is the device's own, whoever had work queued.
--skip-s leaves out each device's first S seconds (the processes starting); --label names a
process in the output instead of its PID.
"""
import argparse
import collections
import json
import statistics
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log")
    p.add_argument("--skip-s", type=float, default=0.0, help="leave out each device's first S seconds")
    p.add_argument("--label", action="append", default=[], metavar="PID=NAME", help="a name for a process")
    return p.parse_args()


def read(path):
    stretches = collections.defaultdict(list)
    try:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                try:
                    s = json.loads(line)
                    stretches[s["device"]].append((s["start_ns"], s["end_ns"], s["pid"]))
                except (ValueError, KeyError, TypeError) as e:
                    sys.exit(f"sim-kernel-log: {path}:{number}: not a kernel log line ({e})")
    except OSError as e:
        sys.exit(f"sim-kernel-log: {path}: {e.strerror}")
    return stretches


def summarise(stretches, skip_ns, name):
    stretches.sort()
    first = stretches[0][0] + skip_ns
    stretches = [s for s in stretches if s[0] >= first]
    if not stretches:
        return ["  nothing after the skipped start"]
    begin, end = stretches[0][0], max(s[1] for s in stretches)
    span = end - begin
    busy = collections.Counter()
    gaps = collections.defaultdict(list)
    reach, last = stretches[0][1], stretches[0][2]
    for start, stop, pid in stretches:
        busy[pid] += stop - start
        if start > reach:
            gaps["same process" if pid == last else "another process"].append(start - reach)
        if stop >= reach:
            reach, last = stop, pid
    idle = sum(sum(g) for g in gaps.values())
    out = [f"  span {span / 1e6:.1f} ms, idle {idle / 1e6:.1f} ms ({idle / span:.1%})"]
    for pid, ns in sorted(busy.items(), key=lambda kv: -kv[1]):
        out.append(f"  {name(pid):>12}: device time {ns / 1e6:9.1f} ms ({ns / span:.1%})")
    out.append(f"  {'idle gaps':>15} {'count':>6} {'total ms':>9} {'median us':>9}  {'p90 us':>7}")
    for kind in ("same process", "another process"):
        g = sorted(gaps.get(kind, []))
        if not g:
            continue
        out.append(f"  {kind:>15} {len(g):>6} {sum(g) / 1e6:9.1f} {statistics.median(g) / 1e3:9.0f} "
                   f"{g[int(0.9 * (len(g) - 1))] / 1e3:7.0f}")
    return out


def main():
    args = parse_args()
    labels = {}
    for item in args.label:
        pid, sep, label = item.partition("=")
        if not sep or not pid.isdigit():
            sys.exit(f"sim-kernel-log: --label {item!r}: expected PID=NAME")
        labels[int(pid)] = label
    stretches = read(args.log)
    if not stretches:
        sys.exit(f"sim-kernel-log: {args.log}: no stretches (was GPUSLICE_SIM_KERNEL_LOG set for the processes?)")
    for device in sorted(stretches):
        print(f"device {device}:")
        print("\n".join(summarise(stretches[device], int(args.skip_s * 1e9), lambda pid: labels.get(pid, str(pid)))))


if __name__ == "__main__":
    main()
