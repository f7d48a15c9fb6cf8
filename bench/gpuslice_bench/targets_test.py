import os
import tempfile
import unittest

from gpuslice_bench.scenario import ScenarioError, load
from gpuslice_bench.targets import evaluate, text

SCENARIO = """name: s
description: d
duration: 10
modes: [solo, unmanaged, gpuslice, mps]
tenants:
  - name: svc
    workload: {kind: latency, period_ms: 10}
    compute: {request: 30, class: latency}
  - name: train
    workload: {kind: compute}
    compute: {request: 70}
events:
  - {at: 4, signal: STOP, tenant: train}
  - {at: 6, signal: CONT, tenant: train}
targets:
"""


def timeline(shares, util, steady=None, dt=1.0, entitled=None):
    """A results timeline of len(util) windows of dt seconds from t = 0."""
    n = len(util)
    return {"t0": [i * dt for i in range(n)], "t1": [(i + 1) * dt for i in range(n)],
            "steady": steady or [True] * n, "utilisation": util, "share": shares,
            "entitled": entitled or {name: [0.5] * n for name in shares}, "end_s": n * dt}


def results(**gpuslice_extra):
    lat = lambda p99: {"p50_us": 1000, "p99_us": p99, "p999_us": p99, "max_us": p99 * 2}
    gpuslice = {"status": "ran", "tenants": {"svc": {"share": 0.1, "latency": lat(4000)},
                                             "train": {"share": 0.85, "worst_share_error": 0.01}},
                "run": {"jain": 0.995, "gpu_utilisation": 0.95, "worst_share_error": 0.02}}
    gpuslice.update(gpuslice_extra)
    return {"modes": {
        "solo": {"status": "ran", "tenants": {"svc": {"share": 0.1, "latency": lat(1300)}, "train": {"share": 0.99}}},
        "unmanaged": {"status": "ran", "tenants": {"svc": {"share": 0.1, "latency": lat(5000)},
                                                   "train": {"share": 0.88}},
                      "run": {"gpu_utilisation": 0.99}},
        "gpuslice": gpuslice,
        "mps": {"status": "skipped", "reason": "MPS needs a real GPU"}}}


class TargetsTest(unittest.TestCase):
    def scenario(self, targets_yaml):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(SCENARIO + targets_yaml)
        self.addCleanup(os.unlink, f.name)
        return load(f.name)

    def check(self, targets_yaml, doc):
        return evaluate(self.scenario(targets_yaml).targets, doc)

    def test_bounds_by_number_and_by_other_figures(self):
        got = self.check("""  - {metric: p99_ms, tenant: svc, at_most: {mode: solo, plus: 5}, source: a}
  - {metric: p99_ms, tenant: svc, at_most: {mode: unmanaged}, source: b}
  - {metric: share, tenant: train, at_least: {mode: unmanaged, times: 0.9}, source: c}
  - {metric: share, tenant: train, within: 0.03, of: 0.8, source: d}
  - {metric: gpu_busy, at_least: {mode: unmanaged, plus: -0.03}, source: e}
  - {metric: max_ms, tenant: svc, at_most: 5, source: f}
  - {metric: share, tenant: svc, at_least: {metric: idle_left_by_others, times: 0.9}, source: g}
""", results())
        self.assertEqual([e["met"] for e in got], [True, True, True, False, False, False, False])
        self.assertAlmostEqual(got[0]["measured"], 4.0)
        self.assertAlmostEqual(got[0]["bound"], 6.3)       # 1.3 ms alone + 5 ms
        self.assertAlmostEqual(got[2]["bound"], 0.792)     # 90% of 88%
        self.assertAlmostEqual(got[4]["bound"], 0.96)
        self.assertAlmostEqual(got[6]["bound"], 0.9 * 0.15)  # 1 - train's 85%
        self.assertEqual(got[1]["target"], "svc p99_ms under gpuslice ≤ p99_ms unmanaged")
        self.assertEqual(got[0]["source"], "a")
        printed = text(got)
        self.assertIn("NOT MET: 85.0% (target 80.0% ± 3 points)", printed)
        self.assertIn("met: 4.00 ms (target ≤ 6.30 ms)", printed)

    def test_a_mode_that_did_not_run_is_not_measured_rather_than_failed(self):
        got = self.check("  - {metric: share, tenant: svc, mode: mps, at_least: 0.1, source: x}\n", results())
        self.assertIsNone(got[0]["met"])
        self.assertIn("mps skipped", got[0]["why"])
        self.assertIn("not measured (mode mps skipped)", text(got))

    def test_windows_take_the_worst_of_consecutive_steady_stretches(self):
        # Four 1 s windows; in 2 s windows the second pair is 5 points off (0.45 and 0.55).
        tl = timeline({"svc": [0.5, 0.5, 0.4, 0.5], "train": [0.5, 0.5, 0.6, 0.5]}, [1.0] * 4)
        doc = results(timeline=tl)
        got = self.check("""  - {metric: worst_share_error, window_s: 2, at_most: 0.02, source: x}
  - {metric: worst_window_jain, window_s: 2, at_least: 0.99, source: y}
  - {metric: worst_share_error, window_s: 5, at_most: 0.02, source: z}
""", doc)
        self.assertAlmostEqual(got[0]["measured"], 0.05)
        self.assertFalse(got[0]["met"])
        self.assertAlmostEqual(got[1]["measured"], (0.9 + 1.1) ** 2 / (2 * (0.81 + 1.21)))
        self.assertIsNone(got[2]["met"])  # no 5 s window in a 4 s run
        self.assertIn("no 5 s window", got[2]["why"])
        # A window is cut by a sample that is not steady (a process came or went in it).
        tl["steady"] = [True, False, True, True]
        got = self.check("  - {metric: worst_share_error, window_s: 2, at_most: 0.02, source: x}\n", results(timeline=tl))
        self.assertAlmostEqual(got[0]["measured"], 0.05)

    def test_figures_around_an_event(self):
        # Eight 1 s windows; train is stopped at 4.0 s and continued at 6.0 s. The device is 99%
        # busy before, 90% in the window of the stop and 99% in the next one.
        util = [0.99, 0.99, 0.99, 0.99, 0.90, 0.99, 0.99, 0.99]
        svc = [0.5, 0.5, 0.5, 0.5, 0.8, 0.99, 0.5, 0.5]
        doc = results(timeline=timeline({"svc": svc, "train": [0.5] * 8}, util),
                      events=[{"at_s": 4.0, "signal": "STOP", "tenant": "train"},
                              {"at_s": 6.0, "signal": "CONT", "tenant": "train"}])
        got = self.check("""  - {metric: event_idle_ms, event: 0, at_most: 22, source: x}
  - {metric: busy_after_event, tenant: svc, event: 0, after_s: 1, at_least: 0.95, source: y}
  - {metric: busy_after_event, tenant: svc, event: 1, at_least: 0.95, source: z}
""", doc)
        self.assertAlmostEqual(got[0]["measured"], 90.0)  # 9% of one second beyond the usual 1%
        self.assertFalse(got[0]["met"])
        self.assertAlmostEqual(got[1]["measured"], 0.99)  # [5, 6]: the second second of the stop
        self.assertTrue(got[1]["met"])
        self.assertAlmostEqual(got[2]["measured"], 0.5)   # from the CONT to the end
        doc["modes"]["gpuslice"]["events"] = []
        self.assertIn("event 0 was not sent", self.check("  - {metric: event_idle_ms, event: 0, at_most: 1, source: x}\n",
                                                          doc)[0]["why"])

    def test_windows_scale_with_the_run_and_bounds_do_not(self):
        s = self.scenario("""  - {metric: worst_share_error, window_s: 10, at_most: 0.02, source: x}
  - {metric: busy_after_event, tenant: svc, event: 0, after_s: 1, at_least: 0.95, source: y}
""").scaled(0.2)
        self.assertEqual(s.targets[0].window_s, 2)
        self.assertEqual(s.targets[0].bound, 0.02)
        self.assertEqual(s.targets[1].after_s, 1)
        self.assertAlmostEqual(s.events[0].at, 0.8)

    def test_bad_targets_are_refused_in_one_line_naming_the_key(self):
        for broken, expected in [
            ("  - {metric: share, tenant: svc, at_most: 1, sorce: x}\n",
             "targets[0]: unknown key 'sorce'; valid keys: metric, source, tenant, mode, at_most"),
            ("  - {metric: shares, tenant: svc, at_most: 1, source: x}\n", "targets[0].metric: expected one of share,"),
            ("  - {metric: share, at_most: 1, source: x}\n", "targets[0]: missing key 'tenant'"),
            ("  - {metric: jain, tenant: svc, at_most: 1, source: x}\n", "targets[0].tenant: 'jain' is a figure of the whole run"),
            ("  - {metric: share, tenant: svc, source: x}\n", "targets[0]: expected exactly one of at_most, at_least"),
            ("  - {metric: share, tenant: svc, at_most: 1, at_least: 0, source: x}\n", "expected exactly one of"),
            ("  - {metric: share, tenant: svc, within: 0.1, source: x}\n", "targets[0]: missing key 'of'"),
            ("  - {metric: share, tenant: svc, at_most: 1}\n", "targets[0]: missing key 'source'"),
            ("  - {metric: share, tenant: nobody, at_most: 1, source: x}\n", "targets[0].tenant: expected one of svc, train"),
            ("  - {metric: share, tenant: svc, mode: mig, at_most: 1, source: x}\n", "targets[0].mode: expected one of solo"),
            ("  - {metric: share, tenant: svc, at_most: {mode: solo, tims: 2}, source: x}\n",
             "targets[0].at_most: unknown key 'tims'"),
            ("  - {metric: share, tenant: svc, window_s: 2, at_most: 1, source: x}\n",
             "targets[0].window_s: only worst_share_error and worst_window_jain"),
            ("  - {metric: event_idle_ms, event: 2, at_most: 1, source: x}\n",
             "targets[0].event: expected an integer from 0 to 1 (an index into events), got 2"),
            ("  - {metric: busy_after_event, tenant: svc, at_most: 1, source: x}\n", "targets[0]: missing key 'event'"),
            ("  - {metric: gpu_busy, at_least: {metric: share}, source: x}\n",
             "targets[0]: the bound's 'share' is a figure of one tenant: name its tenant"),
            ("  - {metric: share, tenant: svc, at_most: 1, source: x}\nbogus: 1\n", "top level: unknown key 'bogus'"),
        ]:
            with self.subTest(expected=expected):
                with self.assertRaises(ScenarioError) as caught:
                    self.scenario(broken)
                message = str(caught.exception)
                self.assertIn(expected, message)
                self.assertIn(".yaml: ", message)
                self.assertNotIn("\n", message)

    def test_bad_events_and_classes_are_refused(self):
        for old, new, expected in [
            ("signal: STOP", "signal: SIGSTOP", "events[0].signal: expected one of STOP, CONT, KILL, TERM"),
            ("{at: 4,", "{at: 12,", "events[0].at: expected a number of seconds below the duration (10)"),
            ("tenant: train}\n  - {at: 6", "tenant: trane}\n  - {at: 6", "events[0].tenant: expected one of svc, train"),
            ("class: latency", "class: realtime", "tenants[0].compute.class: expected one of latency, standard, background"),
            ("signal: CONT, tenant: train}", "signal: CONT, tenant: train, workload: 1}",
             "events[1].workload: expected an integer from 0 to 0"),
        ]:
            with self.subTest(expected=expected):
                with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
                    f.write(SCENARIO.replace(old, new).replace("targets:\n", ""))
                self.addCleanup(os.unlink, f.name)
                with self.assertRaises(ScenarioError) as caught:
                    load(f.name)
                self.assertIn(expected, str(caught.exception))


if __name__ == "__main__":
    unittest.main()
