#!/usr/bin/env python3
"""How few GPUs a pod list's shares need when packed offline, knowing them all.

docs/placement.md compares what an online policy leaves unallocated against this: at 100% arrived
demand every GPU of the default list's runs is taken, and what stays idle is the holes beside
shares. Offline best-fit decreasing (the largest share first, each onto the GPU it leaves the
smallest hole on, a new GPU only when none has room) packs the same shares knowing the whole list,
with no CPU, memory or node limits: a reference an online policy can approach, not a bound it
cannot pass (best-fit decreasing is not optimal).

  scripts/share-packing-bound.py POD_LIST.csv [--gpus 6212]

Prints the shares' count and demand, the GPUs they take and the holes left, in GPUs and as a
percentage of --gpus (the cluster's GPU count), and the holes by size.
"""
import argparse
import bisect
import collections
import csv
import signal
import sys


def read_shares(path):
    shares = []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        for column in ("num_gpu", "gpu_milli"):
            if column not in (reader.fieldnames or []):
                sys.exit(f"{path}: no column {column!r} in the header")
        for line, row in enumerate(reader, start=2):
            try:
                num_gpu, milli = int(row["num_gpu"]), int(row["gpu_milli"])
            except ValueError:
                sys.exit(f"{path}:{line}: num_gpu and gpu_milli must be integers")
            if num_gpu == 1 and 0 < milli < 1000:
                shares.append(milli)
    return shares


def best_fit_decreasing(shares):
    # Holes of the GPUs opened so far, kept sorted: the tightest hole that fits is a bisection.
    holes = []
    for share in sorted(shares, reverse=True):
        at = bisect.bisect_left(holes, share)
        if at == len(holes):
            bisect.insort(holes, 1000 - share)
        else:
            hole = holes.pop(at) - share
            bisect.insort(holes, hole)
    return holes


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends it quietly
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pods", help="a pod list (the 11- or 5-column format)")
    parser.add_argument("--gpus", type=int, default=6212, help="the cluster's GPUs, for the percentage (default 6212)")
    args = parser.parse_args()
    shares = read_shares(args.pods)
    holes = best_fit_decreasing(shares)
    idle = sum(holes)
    print(f"{len(shares)} shares asking {sum(shares) / 1000:.1f} GPUs take {len(holes)} GPUs packed offline "
          f"(best-fit decreasing); holes {idle / 1000:.1f} GPUs = {100 * idle / (1000 * args.gpus):.2f}% of {args.gpus}")
    by_size = collections.Counter(h for h in holes if h > 0)
    print("holes by size (milli-GPU: GPUs):", ", ".join(f"{size}: {count}" for size, count in sorted(by_size.items())))


if __name__ == "__main__":
    main()
