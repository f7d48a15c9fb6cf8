"""SVG charts drawn by gnuplot: each tenant's GPU share over time per mode, and the latency CDF
of the latency-sensitive tenants.

The data and the gnuplot script of every chart are kept beside it in data/, so a chart can be
redrawn or restyled by hand (`cd report/<scenario> && gnuplot data/share-gpuslice.gp`).
"""
import os
import shutil
import subprocess

TENANT_COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f",
                  "#ff9da7", "#bab0ac"]
MODE_COLOURS = {"solo": "#555555", "unmanaged": "#d62728", "gpuslice": "#1f77b4", "mps": "#2ca02c",
                "mig": "#9467bd"}
MODE_LABELS = {"solo": "alone", "unmanaged": "unmanaged", "gpuslice": "gpuslice", "mps": "MPS", "mig": "MIG"}

_TERMINAL = """set terminal svg size {w},{h} dynamic font "Helvetica,13" background rgb "white"
set termoption noenhanced
set output "{out}"
set border lw 1 lc rgb "#444444"
set grid xtics ytics lw 1 lc rgb "#e5e5e5"
set key outside right center vertical Left reverse spacing 1.2 samplen 3
"""


class ChartError(Exception):
    pass


def gnuplot_available():
    return shutil.which("gnuplot") is not None


def _quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _draw(folder, name, script):
    data = os.path.join(folder, "data")
    path = os.path.join(data, name + ".gp")
    with open(path, "w") as f:
        f.write(script)
    done = subprocess.run(["gnuplot", os.path.relpath(path, folder)], cwd=folder, capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        raise ChartError(f"gnuplot failed on {path}: {done.stderr.strip()}")
    return name + ".svg"


def share_chart(folder, results, mode):
    """share-<mode>.svg: per tenant its share of GPU time per window (solid) and its entitlement (dashed).
    Windows that run past the first tenant's end are left out: the workloads stopped during them, so
    their shares would fall towards 0 and read as a collapse of the sharing."""
    timeline = results["modes"][mode]["timeline"]
    tenants = [t["name"] for t in results["scenario"]["tenants"]]
    dat = os.path.join("data", f"share-{mode}.dat")
    with open(os.path.join(folder, dat), "w") as f:
        f.write("# window midpoint (s), GPU busy %, then per tenant: share %, entitled %  (" + ", ".join(tenants) + ")\n")
        past_end = timeline.get("past_end") or [False] * len(timeline["t"])
        dropped = sum(past_end)
        if dropped:
            f.write(f"# {dropped} window(s) after the first tenant stopped left out (partial: the workloads ended in them)\n")
        for i, t in enumerate(timeline["t"]):
            if past_end[i]:
                continue
            cells = [f"{t:.3f}", f"{100 * timeline['utilisation'][i]:.2f}"]
            for name in tenants:
                # Entitlement is only defined where no process started or stopped: elsewhere a gap.
                entitled = f"{100 * timeline['entitled'][name][i]:.2f}" if timeline["steady"][i] else "NaN"
                cells += [f"{100 * timeline['share'][name][i]:.2f}", entitled]
            f.write(" ".join(cells) + "\n")
    top = max([100.0] + [100 * u for u in timeline["utilisation"]])
    plots = [f"{_quote(dat)} using 1:2 with lines lw 1.5 dt 3 lc rgb '#999999' title 'GPU busy (all tenants)'"]
    for i, name in enumerate(tenants):
        colour = TENANT_COLOURS[i % len(TENANT_COLOURS)]
        plots.append(f"'' using 1:{3 + 2 * i} with linespoints lw 2.5 pt 7 ps 0.5 lc rgb '{colour}' title {_quote(name)}")
        plots.append(f"'' using 1:{4 + 2 * i} with lines lw 1.5 dt 2 lc rgb '{colour}' notitle")
    plots.append("NaN with lines lw 1.5 dt 2 lc rgb '#333333' title 'entitled share (dashed)'")
    mode_text = "unmanaged (no sharing layer)" if mode == "unmanaged" else MODE_LABELS[mode]
    title = f"{results['scenario']['name']}: GPU share per tenant, {mode_text}"
    # Time-sliced, the running context holds every SM: its time is its SM-time.
    ylabel = "share of the GPU's SM-time (%)" if mode in ("mps", "mig") else "share of the GPU's time (%)"
    script = _TERMINAL.format(w=960, h=520, out=f"share-{mode}.svg") + f"""set title {_quote(title)} font ",15"
set xlabel "time since the tenants started (s)"
set ylabel "{ylabel}"
set yrange [0:{top * 1.05:.0f}]
set xrange [0:{results['scenario']['duration_s']:g}]
set ytics 10
plot {", ".join(plots)}
"""
    return _draw(folder, f"share-{mode}", script)


def _cdf_points(latencies_us, limit=1500):
    """The empirical CDF as a staircase of (ms, percent ≤) corners: every sample of the top 2%,
    evenly thinned below. Drawn `with lines` (gnuplot's `steps` clips badly at the y range)."""
    n = len(latencies_us)
    tail = max(0, int(n * 0.98))
    step = max(1, tail // limit)
    idx = list(range(0, tail, step)) + list(range(tail, n))
    points, below = [], 0.0
    for i in idx:
        x = latencies_us[i] / 1000
        points += [(x, below), (x, 100 * (i + 1) / n)]
        below = 100 * (i + 1) / n
    return points


def latency_cdf_chart(folder, results, latencies):
    """latency-cdf.svg: all requests (left) and the tail from p90 (right), per tenant and mode."""
    series = []
    tenants = [t["name"] for t in results["scenario"]["tenants"]]
    latency_tenants = [name for name in tenants if any((m, name) in latencies for m in results["modes"])]
    for ti, name in enumerate(latency_tenants):
        for mode in results["modes"]:
            values = latencies.get((mode, name))
            if not values:
                continue
            dat = os.path.join("data", f"latency-{name}-{mode}.dat")
            with open(os.path.join(folder, dat), "w") as f:
                f.write(f"# {name}, {mode}: request latency (ms), percent of requests at or below it\n")
                for x, y in _cdf_points(values):
                    f.write(f"{x:.4f} {y:.3f}\n")
            label = f"{name}, {MODE_LABELS[mode]}" if len(latency_tenants) > 1 else MODE_LABELS[mode]
            series.append((f"{_quote(dat)} using 1:2", f"{_quote(dat)} using 1:($2 >= 89.5 ? $2 : NaN)",
                           f"with lines lw 2.5 dt {1 + ti % 4} lc rgb '{MODE_COLOURS[mode]}' title {_quote(label)}"))
    if not series:
        return None
    xs = [v / 1000 for vals in latencies.values() for v in (vals[0], vals[-1])]
    xmin, xmax = min(xs) * 0.8, max(xs) * 1.25
    title = f"{results['scenario']['name']}: request latency of " + ", ".join(latency_tenants)
    rows = (len(series) + 2) // 3
    legend_top = 0.04 + 0.045 * rows          # the legend is a plot of its own below the panels
    bottom = legend_top + 0.11
    legend = ", ".join(f"NaN {style}" for _, _, style in series)
    script = _TERMINAL.format(w=1100, h=520 + 25 * rows, out="latency-cdf.svg") + f"""set multiplot title {_quote(title)} font ",15"
set tmargin at screen 0.86
set bmargin at screen {bottom:.3f}
set logscale x 10
set xrange [{xmin:.4f}:{xmax:.4f}]
set format x "%g"
set xlabel "request latency (ms, log scale)"
set ylabel "requests at or below it (%)"
unset key
set lmargin at screen 0.07
set rmargin at screen 0.48
set title "all requests"
set yrange [0:100]
set ytics 10
plot {", ".join(full + " " + style for full, _, style in series)}
set lmargin at screen 0.57
set rmargin at screen 0.98
set title "the tail: 90th to 100th percentile"
set yrange [90:100]
set ytics 1
set arrow 1 from graph 0, first 99 to graph 1, first 99 nohead dt 3 lc rgb "#777777"
set label 1 "p99" at graph 0.02, first 99.2 textcolor rgb "#555555"
plot {", ".join(tail + " " + style for _, tail, style in series)}
unset arrow 1
unset label 1
unset title
unset xlabel
unset ylabel
unset border
unset tics
unset grid
unset logscale x
set xrange [0:1]
set yrange [0:1]
set lmargin at screen 0.05
set rmargin at screen 0.95
set tmargin at screen {legend_top:.3f}
set bmargin at screen 0.01
set key inside center center horizontal maxcols 3 samplen 3 width 1
plot {legend}
unset multiplot
"""
    return _draw(folder, "latency-cdf", script)


def modes_chart(folder, results):
    """modes.svg: the shared modes side by side: per tenant its share of the GPU's SM-time, and
    the SM-time no tenant used (idle, or in MIG stranded in instances and outside them)."""
    modes = [m for m, r in results["modes"].items() if m != "solo" and r["status"] == "ran"]
    if len(modes) < 2:
        return None
    tenants = [t["name"] for t in results["scenario"]["tenants"]]
    dat = os.path.join("data", "modes.dat")
    with open(os.path.join(folder, dat), "w") as f:
        f.write("# tenant, then per mode its share of the GPU's SM-time over the steady windows (%): " +
                ", ".join(modes) + "\n")
        for name in tenants + ["unused"]:
            cells = []
            for m in modes:
                r = results["modes"][m]
                if name == "unused":
                    busy = r["run"].get("gpu_utilisation")
                    cells.append("NaN" if busy is None else f"{100 * max(0.0, 1 - busy):.2f}")
                else:
                    share = r["tenants"][name].get("share")
                    cells.append("NaN" if share is None else f"{100 * share:.2f}")
            f.write(_quote(name) + " " + " ".join(cells) + "\n")
    plots = [f"{_quote(dat)} using {2 + i}:xtic(1) title {_quote(MODE_LABELS[m])} lc rgb '{MODE_COLOURS[m]}'"
             for i, m in enumerate(modes)]
    plots = [plots[0]] + [p.replace(_quote(dat), "''", 1) for p in plots[1:]]
    title = f"{results['scenario']['name']}: share of the GPU's SM-time per tenant, by mode"
    script = _TERMINAL.format(w=960, h=480, out="modes.svg") + f"""set title {_quote(title)} font ",15"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set ylabel "share of the GPU's SM-time (%)"
set yrange [0:100]
set ytics 10
set grid noxtics
plot {", ".join(plots)}
"""
    return _draw(folder, "modes", script)


def draw_all(folder, results, latencies):
    """Every chart the results allow; returns their file names (relative to `folder`)."""
    os.makedirs(os.path.join(folder, "data"), exist_ok=True)
    drawn = []
    for mode, r in results["modes"].items():
        if mode != "solo" and r["status"] == "ran":
            drawn.append(share_chart(folder, results, mode))
    compared = modes_chart(folder, results)
    if compared:
        drawn.append(compared)
    cdf = latency_cdf_chart(folder, results, latencies)
    if cdf:
        drawn.append(cdf)
    return drawn
