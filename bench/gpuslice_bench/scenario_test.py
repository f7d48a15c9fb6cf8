import os
import tempfile
import unittest

from gpuslice_bench.scenario import ScenarioError, load

VALID = """name: s
description: d
duration: 10
modes: [solo, gpuslice]
tenants:
  - name: svc
    workloads:
      - {kind: latency, period_ms: 5}
      - {kind: memory, chunk: 1Gi, start: 2, hold: 4}
    memory_quota: 25%
    compute: {request: 30, limit: 60}
  - name: train
    workload: {kind: compute}
    processes: 2
"""


class ScenarioTest(unittest.TestCase):
    def load_text(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        return load(f.name), f.name

    def test_defaults_mirror_the_workload_program(self):
        s, _ = self.load_text(VALID)
        svc, train = s.tenants
        self.assertEqual(svc.workloads[0].params["kernels_per_request"], 3)
        self.assertEqual(svc.workloads[0].params["kernel_us"], 200)
        self.assertEqual(train.workloads[0].params, {"kernel_us": 1000, "depth": 2, "width": "narrow", "fault_at": None})
        self.assertEqual(train.workloads[0].processes, 2)
        self.assertEqual(train.weight, 10)  # the shim's default request
        self.assertEqual(svc.quota_bytes(80 << 30), 20 << 30)

    def test_scaling_shrinks_every_time(self):
        s, _ = self.load_text(VALID)
        q = s.scaled(0.5)
        self.assertEqual(q.duration, 5)
        self.assertEqual(q.tenants[0].workloads[1].start, 1)
        self.assertEqual(q.tenants[0].workloads[1].params["hold"], 2)
        self.assertEqual(q.sample_interval, 0.5)

    def test_errors_name_the_file_and_the_key(self):
        for broken, expected in [
            (VALID.replace("request: 30, limit: 60", "request: 70, limit: 60"),
             "tenants[0].compute.limit: expected a limit at least the request (70), got 60"),
            (VALID.replace("start: 2, hold: 4", "start: 2, hold: 9"), "tenants[0].workloads[1].hold"),
            (VALID.replace("name: train", "name: svc"), "tenants[1].name: tenant 'svc' is defined twice"),
            (VALID.replace("processes: 2", "processes: 0"), "tenants[1].processes: expected an integer from 1 to 128"),
            (VALID.replace("kind: compute", "kind: gpu"), "tenants[1].workload.kind: expected one of compute, latency, memory"),
            (VALID.replace("25%", "125%"), "tenants[0].memory_quota: expected a percentage from 1% to 100%"),
        ]:
            with self.subTest(expected=expected):
                with self.assertRaises(ScenarioError) as caught:
                    _, path = self.load_text(broken)
                self.assertIn(expected, str(caught.exception))
                self.assertIn(".yaml: ", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
