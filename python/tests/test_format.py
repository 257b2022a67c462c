"""The tools' compact text answer tells what the Result says about the state (no server needed)."""

from __future__ import annotations

import unittest

import kbserve  # noqa: F401  (puts the package on the path, as the other tests do)

from kernelbox.tools import format_result
from kernelbox.types import Result


class FormatResultTest(unittest.TestCase):
    def test_state_restored_from_a_checkpoint(self):
        r = Result.from_json({"session_id": "s", "status": "ok", "state_restored": {
            "from": "checkpoint", "after_call": 3, "restored": ["x"], "bytes": 10, "took_ms": 5}})
        text = format_result(r)
        self.assertIn("restored from the checkpoint taken after call 3", text)
        self.assertNotIn("state_lost", text)

    def test_state_restored_from_a_hibernation(self):
        r = Result.from_json({"session_id": "s", "status": "ok", "state_restored": {"from": "hibernation"}})
        self.assertIn("restored from hibernation", format_result(r))

    def test_state_lost(self):
        r = Result.from_json({"session_id": "s", "status": "ok", "state_lost": True,
                              "notes": ["state lost: the kernel died"]})
        text = format_result(r)
        self.assertIn("state_lost: true", text)
        self.assertNotIn("state_restored", text)


if __name__ == "__main__":
    unittest.main()
