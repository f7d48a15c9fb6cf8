"""gpuslice-bench's command line."""
import argparse
import dataclasses
import glob
import json
import os
import shlex
import sys

from . import benchmark, charts, overhead, summary, table
from .machine import Paths, mig_unavailable_reason, mps_unavailable_reason, real_driver_present, real_gpu_memory, \
    real_gpu_name
from .progress import Progress
from .quantities import format_bytes
from .runner import RunContext
from .scenario import MODES, ScenarioError, load

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

EPILOG = """\
SCENARIO is a YAML file, or the name of one in bench/scenarios/ (`all`: every one there).
`gpuslice-bench launch-bound [--costs PROFILE]` instead measures what gpuslice costs tenants
whose speed is their launches, with the simulated driver charging real per-call costs (see
`gpuslice-bench launch-bound --help`); `gpuslice-bench latency-sweep [--seed N]` judges the
latency class on randomly drawn pairs of a service and a co-runner.
Each mode runs for the scenario's duration: solo (each tenant alone, the baseline), unmanaged
(together, no sharing layer), gpuslice (together, under LD_PRELOAD=libgpuslice.so with the
scenario's quotas, requests and limits), mps (an MPS server: the simulator's, or on a real GPU
a private nvidia-cuda-mps-control daemon; limits as CUDA_MPS_* variables) and mig (a MIG
instance per tenant, on the simulated GPU only; reported as skipped on a real one). The format and every figure are described in docs/benchmarks.md.

Output: a progress line on stderr, a table on stdout, and a report folder per scenario
(REPORT/<scenario>/): summary.md, results.json, SVG charts and their data. A scenario's
targets are printed after the table as met, NOT MET (with the measured value) or not measured;
they never change the exit status.

Exit status: 0 when every run finished and no quota was exceeded where enforced; 1 when a run
failed or a quota was exceeded; 2 on a usage error, a bad scenario or missing build outputs.
"""


def _parser():
    p = argparse.ArgumentParser(prog="gpuslice-bench", formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Runs GPU-sharing scenarios and reports how much tenants slow each "
                                            "other, with and without gpuslice.", epilog=EPILOG)
    p.add_argument("scenarios", nargs="*", metavar="SCENARIO")
    p.add_argument("--version", action="version", version="gpuslice-bench " + sys.modules[__package__].VERSION)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the reduced form: --scale 0.2")
    size.add_argument("--scale", type=float, metavar="F", help="multiply every time in the scenario by F")
    size.add_argument("--duration", type=float, metavar="S",
                      help="run each mode S seconds (the scenario's other times scale along)")
    p.add_argument("--quantum", type=float, metavar="MS",
                   help="gpuslice's quantum in milliseconds for the gpuslice runs (overrides gpu.quantum_ms)")
    p.add_argument("--modes", metavar="M,M", help="run these modes instead of the scenario's: " + ", ".join(MODES))
    p.add_argument("--report", default="report", metavar="DIR",
                   help="write each scenario's report to DIR/<scenario>/ (default: report)")
    gpu = p.add_mutually_exclusive_group()
    gpu.add_argument("--real-gpu", action="store_true", help="use the installed NVIDIA driver and GPU")
    gpu.add_argument("--sim", action="store_true", help="use the simulated GPU even when a real one is present")
    p.add_argument("--build", metavar="DIR", help="the build tree (default: the one this program belongs to)")
    p.add_argument("--overhead", action="store_true",
                   help="also run shim_overhead_bench and report its medians (alone: report/overhead/)")
    p.add_argument("--check", action="store_true", help="only read and check the scenarios")
    p.add_argument("--list", action="store_true", help="list the bundled scenarios")
    p.add_argument("--table", choices=("full", "brief"), default="full",
                   help="stdout table: every figure (full) or share, p99 and refusals (brief, the demo's)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument("--keep-scratch", action="store_true", help="keep each run's temporary folder (for debugging)")
    return p


def _resolve(names, scenario_dir):
    paths = []
    for name in names:
        if name == "all":
            paths += sorted(glob.glob(os.path.join(scenario_dir, "*.yaml")))
        elif os.path.exists(name) or os.sep in name or name.endswith((".yaml", ".yml")):
            paths.append(name)
        elif os.path.exists(os.path.join(scenario_dir, name + ".yaml")):
            paths.append(os.path.join(scenario_dir, name + ".yaml"))
        else:
            bundled = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(scenario_dir, "*.yaml")))
            raise ScenarioError(f"{name}: no such file, nor a bundled scenario of that name "
                                f"(bundled: {', '.join(bundled)}, or all)")
    return paths


def _modes(text):
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ScenarioError(f"--modes: unknown mode {', '.join(bad) or '(none)'}; valid: {', '.join(MODES)}")
    return modes


def _write_json(path, document):
    with open(path, "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")


def _measurement_parser(name, description):
    p = argparse.ArgumentParser(prog=f"gpuslice-bench {name}", description=description)
    p.add_argument("--duration", type=float, default=4.0, metavar="S", help="seconds each run lasts (default 4)")
    p.add_argument("--costs", default="default", metavar="PROFILE",
                   help="the simulated driver's call costs (GPUSLICE_SIM_CALL_COSTS: default, double, off, ...)")
    p.add_argument("--report", default="report", metavar="DIR", help="write the report to DIR/<name>/")
    p.add_argument("--build", metavar="DIR", help="the build tree (default: the one this program belongs to)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def _launch_bound(source_dir, build_dir, argv):
    from . import launch_bound
    p = _measurement_parser("launch-bound", launch_bound.__doc__.split("\n")[0])
    p.add_argument("--real-gpu", action="store_true",
                   help="use the installed NVIDIA driver and GPU (no call costs to set, no calls counted)")
    p.add_argument("--shapes", nargs="*", metavar="SHAPE",
                   help="only these: " + ", ".join(s.name for s in launch_bound.shapes(1)))
    p.add_argument("--repeats", type=int, default=1, metavar="N",
                   help="run the together comparison N times back to back; its ratio is the median (default 1)")
    p.add_argument("--alone-pairs", type=int, default=16, metavar="N",
                   help="pairs of short runs (1 s, or --duration if shorter) without and with gpuslice for each "
                        "tenant alone; the ratio is their mean, with its 95%% interval (default 16)")
    args = p.parse_args(argv)
    if args.duration <= 0:
        print("gpuslice-bench launch-bound: --duration must be above 0", file=sys.stderr)
        return EXIT_USAGE
    if args.repeats < 1:
        print(f"gpuslice-bench launch-bound: --repeats must be 1 or more, not {args.repeats}", file=sys.stderr)
        return EXIT_USAGE
    if args.alone_pairs < 1:
        print(f"gpuslice-bench launch-bound: --alone-pairs must be 1 or more, not {args.alone_pairs}", file=sys.stderr)
        return EXIT_USAGE
    paths = Paths(source_dir=source_dir, build_dir=os.path.abspath(args.build or build_dir))
    missing = paths.missing(not args.real_gpu, True)
    if missing:
        print(f"gpuslice-bench: not built: {', '.join(missing)} (cmake --build {paths.build_dir})", file=sys.stderr)
        return EXIT_USAGE
    if args.real_gpu and not real_driver_present():
        print("gpuslice-bench launch-bound: --real-gpu, but no NVIDIA driver and GPU here", file=sys.stderr)
        return EXIT_USAGE
    try:
        return launch_bound.main(paths, args, args.report)
    except RuntimeError as e:
        print(f"gpuslice-bench launch-bound: {e}", file=sys.stderr)
        return EXIT_FAILED


def _latency_sweep(source_dir, build_dir, argv):
    from . import latency_sweep
    p = _measurement_parser("latency-sweep", latency_sweep.__doc__.split("\n")[0])
    p.set_defaults(duration=3.0)
    p.add_argument("--seed", type=int, metavar="N", help="draw the pairs of this seed (default: a fresh one, printed)")
    p.add_argument("--pairs", type=int, default=latency_sweep.PAIRS, metavar="N",
                   help=f"how many pairs (default {latency_sweep.PAIRS})")
    p.add_argument("--only", type=int, nargs="*", metavar="I",
                   help="only these pairs of the draw (their numbers in the table's # column, from 0)")
    p.add_argument("--warmup", type=float, default=latency_sweep.WARMUP_S, metavar="S",
                   help=f"seconds of each run whose requests are the arrival, not the p99 (default "
                        f"{latency_sweep.WARMUP_S:g})")
    p.add_argument("--kernel-log", metavar="DIR",
                   help="log each run's kernels to DIR/kernels-SEED-PAIR-MODE.jsonl (GPUSLICE_SIM_KERNEL_LOG; "
                        "scripts/sim-kernel-log.py sums one up)")
    args = p.parse_args(argv)
    if args.duration <= 0 or args.pairs <= 0 or args.warmup < 0:
        print("gpuslice-bench latency-sweep: --duration and --pairs must be above 0, --warmup at least 0",
              file=sys.stderr)
        return EXIT_USAGE
    paths = Paths(source_dir=source_dir, build_dir=os.path.abspath(args.build or build_dir))
    missing = paths.missing(True, True)
    if missing:
        print(f"gpuslice-bench: not built: {', '.join(missing)} (cmake --build {paths.build_dir})", file=sys.stderr)
        return EXIT_USAGE
    try:
        return latency_sweep.main(paths, args, args.report)
    except RuntimeError as e:
        print(f"gpuslice-bench latency-sweep: {e}", file=sys.stderr)
        return EXIT_FAILED


# Measurements that are not scenarios: a first argument of one of these names runs it.
MEASUREMENTS = {"launch-bound": _launch_bound, "latency-sweep": _latency_sweep}


def main(source_dir, build_dir, argv=None):
    argv = list(argv if argv is not None else sys.argv[1:])
    if argv and argv[0] in MEASUREMENTS:
        return MEASUREMENTS[argv[0]](source_dir, build_dir, argv[1:])
    args = _parser().parse_args(argv)
    scenario_dir = os.path.join(source_dir, "bench", "scenarios")
    if args.list:
        for path in sorted(glob.glob(os.path.join(scenario_dir, "*.yaml"))):
            try:
                s = load(path)
                first = s.description.split(". ")[0].rstrip(".")
                print(f"{os.path.basename(path)[:-5]:<28} {first if len(first) <= 90 else first[:89] + '…'}")
            except ScenarioError as e:
                print(f"{os.path.basename(path)[:-5]:<28} (invalid: {e})")
        return EXIT_OK
    if not args.scenarios and not args.overhead:
        _parser().print_usage(sys.stderr)
        print("gpuslice-bench: name a scenario (or `all`, or --list them); see --help", file=sys.stderr)
        return EXIT_USAGE
    scale = 0.2 if args.quick else args.scale if args.scale is not None else 1.0
    if scale <= 0 or (args.duration is not None and args.duration <= 0) or \
            (args.quantum is not None and not 1 <= args.quantum <= 1000):
        print("gpuslice-bench: --scale and --duration must be above 0, --quantum from 1 to 1000 (ms)", file=sys.stderr)
        return EXIT_USAGE
    try:
        scenarios = [load(p) for p in _resolve(args.scenarios, scenario_dir)]
        modes_override = _modes(args.modes) if args.modes else None
    except ScenarioError as e:
        print(f"gpuslice-bench: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        for s in scenarios:
            print(f"{s.path}: ok: {len(s.tenants)} tenants, modes {', '.join(s.modes)}, {s.duration:g} s per mode")
        return EXIT_OK

    paths = Paths(source_dir=source_dir, build_dir=os.path.abspath(args.build or build_dir))
    simulated = args.sim or not (args.real_gpu or real_driver_present())
    needs_shim = any("gpuslice" in (modes_override or s.modes) for s in scenarios)
    missing = paths.missing(simulated, needs_shim) if scenarios else []
    if missing:
        print(f"gpuslice-bench: not built: {', '.join(missing)} (cmake --build {paths.build_dir})", file=sys.stderr)
        return EXIT_USAGE
    if scenarios and not charts.gnuplot_available():
        print("gpuslice-bench: gnuplot is not installed: the report will have no charts "
              "(scripts/install-deps.sh installs gnuplot-nox)", file=sys.stderr)
    command = "gpuslice-bench " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    progress = Progress(quiet=args.quiet)
    status = EXIT_OK

    overhead_figures = None
    if args.overhead:
        progress.phase("overhead · shim_overhead_bench", 5 if args.quick else 40)
        try:
            overhead_figures = overhead.run(paths, args.quick)
        except RuntimeError as e:
            progress.note(f"overhead: {e}")
            status = EXIT_FAILED
        progress.done()
        if overhead_figures:
            print(overhead.text(overhead_figures))
            if not scenarios:
                folder = os.path.join(args.report, "overhead")
                os.makedirs(folder, exist_ok=True)
                _write_json(os.path.join(folder, "results.json"), overhead_figures)
                with open(os.path.join(folder, "summary.md"), "w") as f:
                    f.write("# Per-call overhead of the shim\n\n" + overhead.markdown(overhead_figures) + "\n")
                print(f"\nreport: {folder}/summary.md")

    for s in scenarios:
        factor = args.duration / s.duration if args.duration is not None else scale
        run_scenario = s.scaled(factor) if factor != 1.0 else s
        if args.quantum is not None:
            run_scenario = dataclasses.replace(run_scenario, quantum_ms=args.quantum)
        if simulated:
            gpu_memory = run_scenario.gpu_memory_bytes
            description = f"simulated {run_scenario.model + ' ' if run_scenario.model else ''}GPU " \
                          f"({format_bytes(gpu_memory)}, {(run_scenario.timeslice_us or 2000) / 1000:g} ms hardware timeslice)"
        else:
            gpu_memory = real_gpu_memory() or run_scenario.gpu_memory_bytes
            description = f"{real_gpu_name()} (real GPU)"
        unavailable = {}
        for mode, reason in (("mps", mps_unavailable_reason(simulated)), ("mig", mig_unavailable_reason(simulated))):
            if reason:
                unavailable[mode] = reason
        ctx = RunContext(paths=paths, simulated=simulated, gpu_memory=gpu_memory, progress=progress,
                         keep_scratch=args.keep_scratch)
        header = {"tool": "gpuslice-bench", "format": 1, "command": command, "scale": factor,
                  "platform": {"simulated": simulated, "description": description, "gpu_memory": gpu_memory}}
        outcome = benchmark.run_scenario(run_scenario, modes_override or list(s.modes), ctx, unavailable, header)
        if not simulated:
            # Labelled by what ran: the device the workloads reached, or that none did.
            outcome.results["platform"]["description"] = \
                f"{', '.join(sorted(ctx.devices_seen))} (real GPU)" if ctx.devices_seen else \
                "no GPU: --real-gpu, but no workload reached a device (see each mode's reason)"
        if overhead_figures:
            outcome.results["overhead"] = overhead_figures
        folder = os.path.join(args.report, s.name)
        os.makedirs(folder, exist_ok=True)
        drawn = []
        if charts.gnuplot_available():
            try:
                drawn = charts.draw_all(folder, outcome.results, outcome.latencies)
            except charts.ChartError as e:
                print(f"gpuslice-bench: {e}", file=sys.stderr)
                status = EXIT_FAILED
        outcome.results["charts"] = drawn
        _write_json(os.path.join(folder, "results.json"), outcome.results)
        summary.write(folder, outcome.results, drawn, overhead_figures)
        print(table.brief_report(outcome.results) if args.table == "brief" else table.text_report(outcome.results))
        print(f"\nreport: {folder}/summary.md (charts: {', '.join(drawn) or 'none'})\n")
        if outcome.failed:
            status = EXIT_FAILED
    return status
