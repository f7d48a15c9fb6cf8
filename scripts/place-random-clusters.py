#!/usr/bin/env python3
"""A placement policy against FGD on random clusters nobody tuned it on, and on the artifact's all-node list.

  scripts/place-random-clusters.py DATA_DIR [--out DIR] [--cluster-seed N] [--clusters 20] ...

DATA_DIR holds the FGD artifact's openb_pod_list_*.csv (its data/csv, read in place, never copied
into the repository) and, if present, openb_node_list_all_node.csv. Cluster i (0..CLUSTERS-1) is
`gpuslice-place --random-cluster seed=CLUSTER_SEED+i,family=F` with the families taken in turn;
every pod list runs on every cluster with --policies BASE,OURS and --seeds SEEDS (42, 43, ...);
OURS may name several policies. A cell is one cluster, list and level of arrived GPU demand; its
figure is the mean over seeds of the unallocated GPU %, a policy's minus BASE's (positive: it
leaves more GPUs idle). The report (Markdown, on stdout and in OUT/report.md) counts, for each
policy of OURS, the cells where it is worse by more than --worse and by more than --limit, per
cluster family and in all, and names its worst cells; it lists every cell where the last policy
of OURS is worse, and tabulates the all-node list. A progress line goes to stderr. --resume reuses the runs in OUT
whose command is unchanged.
"""
import argparse
import csv
import math
import os
import subprocess
import sys
import time

FAMILIES = ["mixed", "homogeneous", "cpu-nodes", "big-nodes", "small-nodes"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="the artifact's data/csv folder")
    p.add_argument("--out", default="/tmp/place-random-clusters")
    p.add_argument("--cluster-seed", type=int, default=1000, help="the first cluster's seed (default 1000)")
    p.add_argument("--clusters", type=int, default=20)
    p.add_argument("--families", default=",".join(FAMILIES), help="taken in turn, cluster by cluster")
    p.add_argument("--shape", default="", help="fields added to every cluster's spec, e.g. nodes=100")
    p.add_argument("--seeds", type=int, default=5, help="runs per policy and cell (seeds 42, 43, ...)")
    p.add_argument("--levels", default="70,80,90,100,110", help="arrived GPU demand, %% of the cluster's GPUs")
    p.add_argument("--lists", default="", help="comma-separated pod lists (default: every openb_pod_list_*.csv)")
    p.add_argument("--ours", default="FGD-BF-G", help="comma-separated policies to judge against BASE")
    p.add_argument("--base", default="FGD")
    p.add_argument("--worse", type=float, default=0.1, help="a cell counts as worse above this (points)")
    p.add_argument("--limit", type=float, default=0.5, help="no cell may be worse by more than this")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--no-all-node", action="store_true", help="skip the artifact's all-node list")
    p.add_argument("--place", default=os.environ.get("PLACE", "build/bin/gpuslice-place"))
    p.add_argument("--resume", action="store_true", help="reuse runs in --out made by the same command")
    return p.parse_args()


def pod_lists(args):
    names = sorted(f[len("openb_pod_list_"):-4] for f in os.listdir(args.data)
                   if f.startswith("openb_pod_list_") and f.endswith(".csv"))
    if args.lists:
        wanted = args.lists.split(",")
        missing = [w for w in wanted if w not in names]
        if missing:
            sys.exit(f"{sys.argv[0]}: --lists: no openb_pod_list_{missing[0]}.csv in {args.data}")
        names = wanted
    if not names:
        sys.exit(f"{sys.argv[0]}: no openb_pod_list_*.csv in {args.data}: DATA_DIR must be the artifact's data/csv")
    return names


def run(args, cluster_option, pod_list, out_dir):
    """One gpuslice-place run (every seed of both policies); the per-level means of each policy."""
    levels = [int(x) for x in args.levels.split(",")]
    inflation = (max(levels) + 2) / 100.0
    command = [args.place, *cluster_option, "--pods", os.path.join(args.data, f"openb_pod_list_{pod_list}.csv"),
               "--policies", f"{args.base},{args.ours}", "--seeds", str(args.seeds), "--jobs", str(args.jobs),
               "--inflation", f"{inflation:.2f}", "--quiet", "--no-chart", "--out", out_dir]
    stamp = os.path.join(out_dir, "command.txt")
    metrics = os.path.join(out_dir, "metrics.csv")
    what = " ".join(command[:-2])  # the run, wherever its files go
    if not (args.resume and os.path.exists(metrics) and os.path.exists(stamp)
            and open(stamp).read().split(" --out ")[0] == what):
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"\n{sys.argv[0]}: {' '.join(command)} failed ({done.returncode}): {done.stderr.strip()}")
        with open(os.path.join(out_dir, "stderr.txt"), "w") as f:
            f.write(done.stderr)
        with open(stamp, "w") as f:
            f.write(what)
    sums = {}
    with open(metrics, newline="") as f:
        for row in csv.DictReader(f):
            level = int(float(row["arrived_gpu_pct"]))
            value = float(row["unallocated_gpu_pct"])
            if level in levels and not math.isnan(value):
                s = sums.setdefault((row["policy"], level), [0.0, 0])
                s[0] += value
                s[1] += 1
    means = {key: s[0] / s[1] for key, s in sums.items()}
    shape = ""
    with open(os.path.join(out_dir, "summary.md")) as f:
        for line in f:
            if line.startswith("Cluster shape: random, "):
                shape = line[len("Cluster shape: random, "):].strip().rstrip(".")
    return means, shape


class Progress:
    def __init__(self, total):
        self.total, self.done, self.start = total, 0, time.time()

    def step(self, what):
        self.done += 1
        sys.stderr.write(f"\r{os.path.basename(sys.argv[0])}: {self.done}/{self.total} {what:<40} "
                         f"{time.time() - self.start:5.0f} s")
        sys.stderr.flush()


def cells_of(args, means_by_list, cluster, ours):
    """(cluster, list, level, base, ours) for every level both policies measured."""
    cells = []
    for pod_list, means in means_by_list.items():
        for level in [int(x) for x in args.levels.split(",")]:
            base, value = means.get((args.base, level)), means.get((ours, level))
            if base is not None and value is not None:
                cells.append((cluster, pod_list, level, base, value))
    return cells


def describe(cells, args):
    worse = [c for c in cells if c[4] - c[3] > args.worse + 1e-9]
    over = [c for c in cells if c[4] - c[3] > args.limit + 1e-9]
    worst = max(cells, key=lambda c: c[4] - c[3]) if cells else None
    return worse, over, worst


def cell_text(c):
    return f"{c[0]}, {c[1]}, {c[2]}%: {c[3]:.2f} / {c[4]:.2f} ({c[4] - c[3]:+.2f})"


def family_rows(args, clusters, cells, ours):
    rows = []
    for family in args.families.split(",") + ["all"]:
        chosen = [c for c in cells if family == "all" or clusters[c[0]][0] == family]
        if not chosen:
            continue
        worse, over, worst = describe(chosen, args)
        n = len({c[0] for c in chosen})
        mean = sum(c[4] - c[3] for c in chosen) / len(chosen)
        name = "**all**" if family == "all" else family
        rows.append(f"| {ours} | {name} | {n} | {len(chosen)} | {len(worse)} ({100.0 * len(worse) / len(chosen):.1f}%) | "
                    f"{len(over)} | {mean:+.3f} | {cell_text(worst)} |")
    return rows


def all_node_table(args, all_node, ours_list):
    out = []
    levels = [int(x) for x in args.levels.split(",")]
    names = " / ".join([args.base] + ours_list)
    out.append(f"The artifact's all-node list (`openb_node_list_all_node.csv`: its GPU nodes and its nodes without "
               f"GPUs), {args.seeds} seeds; {names}, **bold** where one of ours is above {args.base}:")
    out.append("")
    out.append("| List | " + " | ".join(f"{lv}%" for lv in levels) + " |")
    out.append("|---|" + "---:|" * len(levels))
    above = {o: 0 for o in ours_list}
    for pod_list, means in all_node.items():
        row = []
        for lv in levels:
            values = [means.get((p, lv)) for p in [args.base] + ours_list]
            if None in values:
                row.append("–")
                continue
            text = " / ".join(f"{v:.2f}" for v in values)
            bold = False
            for o, v in zip(ours_list, values[1:]):
                if v > values[0] + 1e-9:
                    above[o] += 1
                    bold = True
            row.append(f"**{text}**" if bold else text)
        out.append(f"| {pod_list} | " + " | ".join(row) + " |")
    out.append("")
    out.append("Levels where each is above " + args.base + " on the all-node list: " +
               ", ".join(f"{o} {n}" for o, n in above.items()) + ".")
    return out


def report(args, lists, clusters, cells_by_ours, all_node, elapsed):
    out = []
    w = out.append
    ours_list = args.ours.split(",")
    levels = args.levels.replace(",", ", ")
    shape = "," + args.shape if args.shape else ""
    w(f"{len(clusters)} random clusters (`--cluster-seed {args.cluster_seed}`: cluster i is "
      f"`--random-cluster seed={args.cluster_seed}+i,family=F{shape}`, families in turn: {args.families}) x "
      f"{len(lists)} pod lists x levels {levels}% arrived; {args.seeds} seeds a cell (42..{41 + args.seeds}); "
      f"unallocated GPU %, each policy against {args.base}; a cell is worse where the policy is above {args.base} "
      f"by more than {args.worse} points.")
    w("")
    w(f"| Policy | Family | Clusters | Cells | Worse by > {args.worse} | Worse by > {args.limit} | Mean difference | "
      f"Worst cell (cluster, list, level: {args.base} / policy) |")
    w("|---|---|---:|---:|---:|---:|---:|---|")
    for ours in ours_list:
        out.extend(family_rows(args, clusters, cells_by_ours[ours], ours))
    w("")
    for ours in ours_list:
        cells = cells_by_ours[ours]
        worse, over, worst = describe(cells, args)
        if cells:
            share = 100.0 * (len(cells) - len(worse)) / len(cells)
            w(f"- {ours}: cells no worse than {args.base} by more than {args.worse}: {len(cells) - len(worse)} of "
              f"{len(cells)} ({share:.1f}%); worse by more than {args.limit}: {len(over)}; the worst: "
              f"{cell_text(worst)}.")
    w("")
    w("| Cluster | Family | Shape | " + " | ".join(f"{o}: cells worse | worst" for o in ours_list) + " |")
    w("|---|---|---|" + "---:|---|" * len(ours_list))
    for name, (family, shape_text) in clusters.items():
        row = f"| {name} | {family} | {shape_text} |"
        for ours in ours_list:
            chosen = [c for c in cells_by_ours[ours] if c[0] == name]
            cw, _, cworst = describe(chosen, args)
            row += f" {len(cw)} of {len(chosen)} | {cell_text(cworst)[len(name) + 2:] if cworst else '–'} |"
        w(row)
    last = ours_list[-1]
    worse, _, _ = describe(cells_by_ours[last], args)
    if worse:
        w("")
        w(f"Every cell where {last} is worse by more than {args.worse} (cluster, list, level: {args.base} / {last}):")
        w("")
        for c in sorted(worse, key=lambda c: c[3] - c[4]):
            w(f"- {cell_text(c)}")
    if all_node:
        w("")
        out.extend(all_node_table(args, all_node, ours_list))
    w("")
    w(f"Wall time: {elapsed:.0f} s ({os.cpu_count()} CPUs, --jobs {args.jobs}, load average "
      f"{os.getloadavg()[0]:.1f} at the end).")
    return "\n".join(out) + "\n"


def main():
    args = parse_args()
    if not os.access(args.place, os.X_OK):
        sys.exit(f"{sys.argv[0]}: {args.place} not built (cmake --build build --target gpuslice-place)")
    lists = pod_lists(args)
    families = args.families.split(",")
    for f in families:
        if f not in FAMILIES:
            sys.exit(f"{sys.argv[0]}: --families: unknown family {f!r}; valid: {', '.join(FAMILIES)}")
    all_node_path = os.path.join(args.data, "openb_node_list_all_node.csv")
    with_all_node = not args.no_all_node and os.path.exists(all_node_path)
    print(f"{os.path.basename(sys.argv[0])}: cluster seed {args.cluster_seed} (--cluster-seed to change it)",
          file=sys.stderr)
    progress = Progress(len(lists) * (args.clusters + (1 if with_all_node else 0)))
    start = time.time()
    clusters, cells_by_ours = {}, {o: [] for o in args.ours.split(",")}
    for i in range(args.clusters):
        family = families[i % len(families)]
        spec = f"seed={args.cluster_seed + i},family={family}" + (f",{args.shape}" if args.shape else "")
        name = f"c{i:02d}"
        means_by_list = {}
        for pod_list in lists:
            out_dir = os.path.join(args.out, name, pod_list)
            os.makedirs(out_dir, exist_ok=True)
            means_by_list[pod_list], shape = run(args, ["--random-cluster", spec], pod_list, out_dir)
            clusters[name] = (family, shape)
            progress.step(f"{name} {pod_list}")
        for ours in cells_by_ours:
            cells_by_ours[ours] += cells_of(args, means_by_list, name, ours)
    all_node = {}
    if with_all_node:
        for pod_list in lists:
            out_dir = os.path.join(args.out, "all-node", pod_list)
            os.makedirs(out_dir, exist_ok=True)
            all_node[pod_list], _ = run(args, ["--nodes", all_node_path], pod_list, out_dir)
            progress.step(f"all-node {pod_list}")
    sys.stderr.write(f"\r{os.path.basename(sys.argv[0])}: done in {time.time() - start:.0f} s{' ' * 50}\n")
    text = report(args, lists, clusters, cells_by_ours, all_node, time.time() - start)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
