import os
import tempfile
import unittest

from gpuslice_bench import mig
from gpuslice_bench.scenario import ScenarioError, load


class MigLayoutTest(unittest.TestCase):
    def test_derived_from_the_requests_largest_first(self):
        # 7 × 30/100 = 2.1 -> 2g; 7 × 60/100 = 4.2 -> 4g; 7 × 10/100 = 0.7 -> at least 1g.
        got = mig.layout("H100-80GB", [("svc", 30, None), ("train", 60, None), ("batch", 10, None)])
        self.assertEqual(got, (("train", "4g.40gb"), ("svc", "2g.20gb"), ("batch", "1g.10gb")))
        self.assertEqual(mig.layout_variable(got), "4g.40gb,2g.20gb,1g.10gb")
        self.assertEqual(mig.layout("H200", [("a", 50, None), ("b", 50, None)]),
                         (("a", "3g.71gb"), ("b", "3g.71gb")))

    def test_named_profiles_are_kept(self):
        got = mig.layout("A100-40GB", [("a", 10, "3g.20gb"), ("b", 90, "2g.10gb")])
        self.assertEqual(got, (("a", "3g.20gb"), ("b", "2g.10gb")))

    def test_layouts_that_do_not_fit_are_refused(self):
        with self.assertRaisesRegex(ValueError, "do not fit one H100-80GB"):
            mig.layout("H100-80GB", [("a", 1, "4g.40gb"), ("b", 1, "4g.40gb")])
        with self.assertRaises(ValueError):  # 8 compute slices
            mig.layout("H100-80GB", [(str(i), 1, "1g.10gb") for i in range(8)])
        # 3g + 2g + 2g fits only with the 3g at memory slice 4 (placement search, as the driver).
        mig.layout("H100-80GB", [("a", 1, "3g.40gb"), ("b", 1, "2g.20gb"), ("c", 1, "2g.20gb")])

    def _load(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        return load(f.name)

    def test_scenario_checks(self):
        base = "name: s\ndescription: d\nduration: 5\nmodes: [mig]\ntenants:\n  - name: a\n" \
               "    workload: {kind: compute, width: wide}\n"
        with self.assertRaisesRegex(ScenarioError, "gpu.model: mode mig needs the GPU model"):
            self._load(base)
        s = self._load(base.replace("modes:", "gpu: {model: H200}\nmodes:"))
        self.assertEqual(s.mig_layout, (("a", "7g.141gb"),))
        with self.assertRaisesRegex(ScenarioError, r"tenants\[0\].mig: expected a MIG profile of the H200"):
            self._load(base.replace("modes:", "gpu: {model: H200}\nmodes:") + "    mig: 3g.40gb\n")


if __name__ == "__main__":
    unittest.main()
