import unittest

from gpuslice_bench import launch_bound


def figures(alone_ratios):
    """One shape's figures, as measure() leaves them, with tenant a's alone ratios given."""
    mean, half_width = launch_bound._mean_and_half_width(alone_ratios)
    tenant = {"alone": 1000.0, "alone_gpuslice": 990.0, "alone_ratios": alone_ratios, "alone_ratio": mean,
              "alone_ratio_95": half_width, "alone_calls_added": 0.0, "unmanaged": 500.0, "gpuslice": 495.0}
    return {"shape": "bursts", "tenants": {"a": tenant}, "repeats": 1, "alone_pairs": len(alone_ratios),
            "together_ratios": [0.99], "shared_calls_added": 0.001}


class AloneRatioTest(unittest.TestCase):
    def test_the_interval_is_students_t_over_the_standard_error(self):
        mean, half_width = launch_bound._mean_and_half_width([0.98, 1.0, 1.02, 1.0])
        self.assertAlmostEqual(mean, 1.0)
        # sd 0.01633, n 4: t(3) 3.18 x 0.01633 / 2
        self.assertAlmostEqual(half_width, 3.18 * 0.016330 / 2, places=4)
        self.assertEqual(launch_bound._mean_and_half_width([0.97]), (0.97, 0.0))

    def test_the_target_is_judged_on_the_mean_of_the_pairs_not_their_median(self):
        # Median 1.0, mean 0.985: a few bad pairs must count.
        report = launch_bound.text([figures([1.0, 1.0, 1.0, 0.97, 0.955])], "default")
        self.assertIn("alone >= 0.99 of without gpuslice: NOT MET (0.9850 +-", report)
        self.assertIn("a 0.985 +-", report)
        report = launch_bound.text([figures([0.99, 1.0, 0.995, 1.0])], "default")
        self.assertIn("alone >= 0.99 of without gpuslice: met (0.996", report)


if __name__ == "__main__":
    unittest.main()
