import unittest

from gpuslice_bench import metrics
from gpuslice_bench.runner import ProcessRecord, RunRecord
from gpuslice_bench.sampler import Sample
from gpuslice_bench.scenario import Tenant, Workload

COMPUTE = Workload("compute", 1, 0, {"kernel_us": 1000, "depth": 2})
MEMORY = Workload("memory", 1, 0, {"api": "alloc", "chunk": "1Gi", "count": 4, "hold": None, "touch": False})
GI = 1 << 30


def process(tenant, pid, workload=COMPUTE, ready=-0.1, finished=10.0, result=None):
    result = result or {"kernels_per_s": 100.0, "busy_fraction": 0.5}
    return ProcessRecord(tenant=tenant, kind=workload.kind, label=f"{tenant}/{pid}", pid=pid, workload=workload,
                         ready_at=ready, finished_at=finished, result=result, holding=None, latencies_us=[])


class TimelineTest(unittest.TestCase):
    def setUp(self):
        self.tenants = [Tenant("gold", (COMPUTE,), "2Gi", 75), Tenant("bronze", (COMPUTE,), "2Gi", 25)]
        # gold runs 3/4 of every second, bronze 1/4; bronze holds 3 GiB (over its quota) at t=2.
        samples = [Sample(t=float(t), device_busy_ns=t * 10**9,
                          procs={1: (t * 750_000_000, GI), 2: (t * 250_000_000, 3 * GI if t == 2 else GI)})
                   for t in range(0, 5)]
        self.record = RunRecord(mode="gpuslice", tenants=["gold", "bronze"], duration=4.0, samples=samples,
                                processes=[process("gold", 1, finished=3.5), process("bronze", 2, finished=3.5)],
                                wall_s=4.0)

    def test_shares_are_busy_time_over_wall_time_per_window(self):
        rows = metrics.timeline(self.record, self.tenants)
        self.assertEqual(len(rows), 4)
        self.assertAlmostEqual(rows[0]["share"]["gold"], 0.75)
        self.assertAlmostEqual(rows[0]["entitled"]["bronze"], 0.25)
        # The last window contains the processes' end: not steady, so not counted.
        self.assertEqual([r["steady"] for r in rows], [True, True, True, False])

    def test_a_fair_run_has_jain_one_and_counts_samples_over_quota(self):
        rows = metrics.timeline(self.record, self.tenants)
        figs = {t.name: metrics.tenant_figures(self.record, t, rows, 80 * GI) for t in self.tenants}
        solo = {"kernels_per_s": 400.0 / 3}
        figs["gold"]["kernels_per_s"] = 100.0
        figs["bronze"]["kernels_per_s"] = 100.0 / 3
        for f in figs.values():
            metrics.compare_with_solo(f, solo)
        self.assertAlmostEqual(figs["gold"]["np"], 0.75)
        self.assertAlmostEqual(figs["bronze"]["np"], 0.25)
        run = metrics.run_figures("gpuslice", figs, rows, enforcing=True)
        self.assertAlmostEqual(run["jain"], 1.0)
        self.assertAlmostEqual(run["stp"], 1.0)
        self.assertAlmostEqual(run["worst_share_error"], 0.0)
        self.assertEqual(run["quota_violations"], 1)
        self.assertEqual(figs["bronze"]["worst_over_quota"], GI)

    def test_np_counts_work_in_blocks_when_kernels_differ_in_width(self):
        # A wide kernel on a 3g instance (60 SMs) has 60/132 of the blocks it has alone on the GPU:
        # as many kernels per second is 45% of the work.
        fig = metrics.compare_with_solo({"kernels_per_s": 500.0, "blocks_per_s": 500.0 * 60 * 32},
                                        {"kernels_per_s": 500.0, "blocks_per_s": 500.0 * 132 * 32})
        self.assertAlmostEqual(fig["np"], 60 / 132)

    def test_unenforcing_modes_report_no_violations_but_say_what_was_over(self):
        rows = metrics.timeline(self.record, self.tenants)
        figs = {t.name: metrics.tenant_figures(self.record, t, rows, 80 * GI) for t in self.tenants}
        run = metrics.run_figures("unmanaged", figs, rows, enforcing=False)
        self.assertIsNone(run["quota_violations"])
        self.assertEqual(run["samples_over_quota_unenforced"], 1)


class LatencyTest(unittest.TestCase):
    def test_percentiles_are_nearest_rank_like_the_workloads(self):
        values = sorted(float(v) for v in range(1, 101))
        self.assertEqual(metrics.nearest_rank(values, 0.50), 50.0)
        self.assertEqual(metrics.nearest_rank(values, 0.99), 99.0)
        self.assertEqual(metrics.nearest_rank(values, 0.999), 100.0)

    def test_latency_np_is_the_ratio_of_mean_request_times(self):
        shared = {"latency": metrics.latency_summary([2000.0] * 10)}
        solo = {"latency": metrics.latency_summary([1000.0] * 10)}
        metrics.compare_with_solo(shared, solo)
        self.assertAlmostEqual(shared["np"], 0.5)
        self.assertAlmostEqual(shared["latency_inflation"]["p99_us"], 2.0)


if __name__ == "__main__":
    unittest.main()
