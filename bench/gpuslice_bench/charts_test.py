import os
import tempfile
import unittest

from gpuslice_bench import charts, metrics
from gpuslice_bench.metrics_test import COMPUTE, process
from gpuslice_bench.runner import RunRecord
from gpuslice_bench.sampler import Sample
from gpuslice_bench.scenario import Tenant


@unittest.skipUnless(charts.gnuplot_available(), "gnuplot is not installed")
class ShareChartTest(unittest.TestCase):
    def test_the_window_the_workloads_ended_in_is_left_out_not_drawn_as_a_collapse(self):
        tenants = [Tenant("gold", (COMPUTE,), "2Gi", 75), Tenant("bronze", (COMPUTE,), "2Gi", 25)]
        # Both compute 3/4 and 1/4 of every second and stop at 3.5 s; the last sample is at 4 s, so
        # the window 3-4 s holds half a second of nothing: shares 0.375 and 0.125.
        samples = [Sample(t=float(t), device_busy_ns=min(t, 3.5) * 10**9,
                          procs={1: (min(t, 3.5) * 750_000_000, 0), 2: (min(t, 3.5) * 250_000_000, 0)})
                   for t in range(0, 5)]
        record = RunRecord(mode="gpuslice", tenants=["gold", "bronze"], duration=4.0, samples=samples,
                           processes=[process("gold", 1, finished=3.5), process("bronze", 2, finished=3.5)],
                           wall_s=4.0)
        rows = metrics.timeline(record, tenants)
        self.assertAlmostEqual(rows[-1]["share"]["gold"], 0.375)  # what the chart used to draw last
        results = {"scenario": {"name": "test", "duration_s": 4.0,
                                "tenants": [{"name": "gold"}, {"name": "bronze"}]},
                   "modes": {"gpuslice": {"timeline": metrics.timeline_json(rows, tenants)}}}
        with tempfile.TemporaryDirectory() as folder:
            os.mkdir(os.path.join(folder, "data"))
            charts.share_chart(folder, results, "gpuslice")
            with open(os.path.join(folder, "data", "share-gpuslice.dat")) as f:
                lines = f.read().splitlines()
        points = [line.split() for line in lines if not line.startswith("#")]
        self.assertEqual([p[0] for p in points], ["0.500", "1.500", "2.500"])
        self.assertEqual([p[2] for p in points], ["75.00"] * 3)
        self.assertIn("# 1 window(s) after the first tenant stopped left out", "\n".join(lines))


if __name__ == "__main__":
    unittest.main()
