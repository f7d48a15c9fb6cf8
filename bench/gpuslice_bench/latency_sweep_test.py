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


if __name__ == "__main__":
    unittest.main()
