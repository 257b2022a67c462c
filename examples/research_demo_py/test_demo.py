"""The Python research demo runs end to end against a real serve (local backend)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import demo  # noqa: E402


def require_jupyter():
    ok = subprocess.run(["/usr/bin/python3", "-c", "import jupyter_server, ipykernel, pandas, matplotlib"],
                        capture_output=True).returncode == 0
    if not ok:
        if os.environ.get("KERNELBOX_REQUIRE_JUPYTER") == "1":
            raise AssertionError("Debian's python3 lacks jupyter_server/ipykernel/pandas/matplotlib")
        raise unittest.SkipTest("no Jupyter with pandas and matplotlib in /usr/bin/python3")


class DemoTest(unittest.TestCase):
    def test_demo(self):
        require_jupyter()
        lines = []
        t0 = time.monotonic()
        f = demo.main([], out=lines.append)
        sys.stderr.write(f"\n  [research_demo_py: {time.monotonic() - t0:.1f} s] ")
        text = "\n".join(lines)
        self.assertEqual(f["steps"], 6)
        self.assertIn("accuracy per parameter", f["answer"])
        self.assertIn("refused before anything was staged", text)
        self.assertEqual(f["summary"]["df_loads"], 1, "the CSV is read once; later cells reuse df")
        self.assertEqual(f["summary"]["preloaded"], ["pd", "plt"])
        names = {os.path.basename(p) for p in f["artifacts"]}
        self.assertTrue({"accuracy_per_param.png", "report.md", "summary.json"} <= names, names)


if __name__ == "__main__":
    unittest.main()
