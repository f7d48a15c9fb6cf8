import unittest

from gpuslice_bench import latency_sweep, tenant_runs
from gpuslice_bench.machine import Paths


class KernelLogTest(unittest.TestCase):
    def test_each_run_of_a_pair_has_its_own_log_and_none_is_asked_for_by_default(self):
        pair = latency_sweep.draw_pairs(7, 3)[2]
        self.assertEqual(latency_sweep.kernel_log_path("/tmp/k", 7, pair, "gpuslice"), "/tmp/k/kernels-7-2-gpuslice.jsonl")
        self.assertIsNone(latency_sweep.kernel_log_path(None, 7, pair, "gpuslice"))

    def test_the_simulated_driver_is_told_where_to_log_only_when_asked(self):
        paths = Paths(source_dir="/src", build_dir="/build")
        tenant = tenant_runs.Tenant("t", ["compute"])
        args = (paths, "/dev/shm/s", "/tmp/state", "/tmp/calls", "default", tenant, True)
        self.assertNotIn("GPUSLICE_SIM_KERNEL_LOG", tenant_runs._env(*args, False))
        self.assertEqual(tenant_runs._env(*args, False, "/tmp/k.jsonl")["GPUSLICE_SIM_KERNEL_LOG"], "/tmp/k.jsonl")
        # A real GPU has no simulated driver to log.
        self.assertNotIn("GPUSLICE_SIM_KERNEL_LOG", tenant_runs._env(*args, True, "/tmp/k.jsonl"))


class EntitledTimeTest(unittest.TestCase):
    def test_the_co_runner_keeps_its_unmanaged_time_unless_its_limit_or_the_service_leaves_less(self):
        self.assertAlmostEqual(latency_sweep.entitled_time(0.60, 0, 0.20), 0.60)
        self.assertAlmostEqual(latency_sweep.entitled_time(0.60, 50, 0.20), 0.50)
        # Unmanaged it took some of what the service is owed within its request: not its to keep.
        self.assertAlmostEqual(latency_sweep.entitled_time(0.78, 0, 0.31), 0.69)
        self.assertAlmostEqual(latency_sweep.entitled_time(0.78, 60, 0.31), 0.60)

    def test_the_service_demand_is_its_kernels_over_its_period(self):
        pair = latency_sweep.Pair(index=0, service_kernel_us=515, service_kernels=3, service_period_ms=5.05,
                                  service_request=34, corunner_kernel_us=4301, corunner_depth=2,
                                  corunner_processes=3, corunner_class="background", corunner_limit=0)
        self.assertAlmostEqual(pair.service_demand(), 3 * 0.515 / 5.05)

    def test_the_generator_keeps_every_service_within_its_request(self):
        for pair in latency_sweep.draw_pairs(12345, 40):
            self.assertLessEqual(pair.service_demand(), 0.9 * pair.service_request / 100 + 1e-3)


if __name__ == "__main__":
    unittest.main()
