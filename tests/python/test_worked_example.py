"""docs/real-caches.md's worked example, run end to end (docs/examples/real-caches/run.sh): the
stand-in model's capture, its profile, sweeps on both, recommend --cache, calibrate and the
simulation scoring the scales. Needs the kvtune binary: KVTUNE_BINARY (CTest sets it)."""

import json
import os
import subprocess
import tempfile
import tomllib
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "docs", "examples", "real-caches", "run.sh")


class WorkedExampleTest(unittest.TestCase):
    def test_every_step_runs_and_writes_what_the_docs_show(self):
        kvtune = os.environ.get("KVTUNE_BINARY")
        self.assertTrue(kvtune and os.path.exists(kvtune),
                        "set KVTUNE_BINARY to the built kvtune (CTest's python.capture does)")
        with tempfile.TemporaryDirectory() as tmp:
            work = os.path.join(tmp, "example")
            run = subprocess.run([SCRIPT, kvtune, work], capture_output=True, text=True)
            self.assertEqual(run.returncode, 0, run.stdout[-3000:] + run.stderr[-3000:])

            with open(os.path.join(work, "standin.toml"), "rb") as f:
                profile = tomllib.load(f)
            self.assertEqual(profile["num_layers"], 3)
            self.assertEqual([o["layers"] for o in profile["overrides"]], [[0], [1], [2]])
            self.assertGreater(profile["keys"]["scale"], 0.0)
            self.assertEqual(profile["measured"]["layers"], [0, 1, 2])

            def summary(name):
                with open(os.path.join(work, name, "summary.json"), encoding="utf-8") as f:
                    return json.load(f)
            for name in ("sweep-capture", "sweep-profile", "recommend"):
                self.assertIsNotNone(summary(name)["best"], name)
            self.assertEqual(summary("sweep-capture")["workload"]["profile"], "cache")
            self.assertEqual(summary("recommend")["workload"]["model"], "standin/tiny")
            self.assertTrue(os.path.exists(os.path.join(work, "scales", "kv_scales.safetensors")))
            self.assertIn("fp8 e4m3, calibrated k_scale/v_scale", run.stdout)


if __name__ == "__main__":
    unittest.main()
