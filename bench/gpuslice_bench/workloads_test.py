import unittest

from gpuslice_bench.scenario import Workload
from gpuslice_bench.workloads import command_line


class CommandLineTest(unittest.TestCase):
    def argv(self, kind, **params):
        return command_line("wl", Workload(kind, 1, 0, params), 5.0, 1, "t/x", "/tmp/lat")

    def test_each_kind_gets_its_options(self):
        narrow = self.argv("compute", kernel_us=1000, depth=2, width="narrow", fault_at=None)
        self.assertEqual(narrow[:8], ["wl", "compute", "--kernel-us", "1000", "--depth", "2", "--duration", "5.000"])
        self.assertNotIn("--width", narrow)
        self.assertNotIn("--fault-after", narrow)
        wide = self.argv("compute", kernel_us=1000, depth=2, width="wide", fault_at=1.5)
        self.assertIn("--fault-after", wide)
        self.assertEqual(wide[wide.index("--fault-after") + 1], "1.500")
        self.assertEqual(wide[wide.index("--width") + 1], "wide")
        latency = self.argv("latency", period_ms=10, kernels_per_request=2, kernel_us=500, width="wide", slo_ms=5)
        self.assertEqual(latency[latency.index("--width") + 1], "wide")
        memory = self.argv("memory", api="alloc", chunk="1Gi", count=2, hold=None, touch=False)
        self.assertEqual(memory[1:8], ["memory", "--api", "alloc", "--chunk", str(1 << 30), "--count", "2"])
        self.assertNotIn("--report-interval", memory)


if __name__ == "__main__":
    unittest.main()
