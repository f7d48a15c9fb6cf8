import unittest

from gpuslice_bench.entitlement import water_fill, workload_demand
from gpuslice_bench.scenario import Workload


class WaterFillTest(unittest.TestCase):
    def test_equal_requests_share_equally(self):
        self.assertEqual(water_fill({"a": 50, "b": 50}, {"a": 1, "b": 1}), {"a": 0.5, "b": 0.5})

    def test_requests_are_weights(self):
        share = water_fill({"gold": 75, "bronze": 25}, {"gold": 1, "bronze": 1})
        self.assertAlmostEqual(share["gold"], 0.75)
        self.assertAlmostEqual(share["bronze"], 0.25)

    def test_what_a_small_demand_leaves_goes_to_the_others_by_weight(self):
        share = water_fill({"svc": 30, "a": 35, "b": 35}, {"svc": 0.1, "a": 1, "b": 1})
        self.assertAlmostEqual(share["svc"], 0.1)
        self.assertAlmostEqual(share["a"], 0.45)
        self.assertAlmostEqual(share["b"], 0.45)

    def test_a_limit_caps_even_an_otherwise_idle_gpu(self):
        share = water_fill({"nb": 10}, {"nb": 0.2})
        self.assertAlmostEqual(share["nb"], 0.2)

    def test_a_tenant_that_wants_nothing_is_entitled_to_nothing(self):
        self.assertEqual(water_fill({"mem": 50, "a": 50}, {"mem": 0.0, "a": 1})["mem"], 0.0)


class DemandTest(unittest.TestCase):
    def test_latency_demand_is_kernel_time_per_period(self):
        w = Workload("latency", 1, 0, {"period_ms": 10.0, "kernels_per_request": 3, "kernel_us": 300})
        self.assertAlmostEqual(workload_demand(w), 0.09)

    def test_compute_wants_the_whole_gpu_and_memory_none_of_it(self):
        self.assertEqual(workload_demand(Workload("compute", 1, 0, {"kernel_us": 10, "depth": 1})), 1.0)
        self.assertEqual(workload_demand(Workload("memory", 1, 0, {})), 0.0)


if __name__ == "__main__":
    unittest.main()
