"""The Python error table agrees with api/errors.go (no server needed)."""

from __future__ import annotations

import http
import os
import re
import unittest

from kbserve import REPO

import kernelbox
from kernelbox.errors import ERRORS, APIError, error_for


def go_table():
    """Return {code: status} from api/errors.go: the codes, and the table's statuses."""
    api = os.path.join(REPO, "api")
    # The codes are declared beside their concerns (errors.go, durable.go, ...).
    src = "\n".join(open(os.path.join(api, f)).read() for f in sorted(os.listdir(api))
                    if f.endswith(".go") and not f.endswith("_test.go"))
    consts = dict(re.findall(r'^\s*(Code\w+)\s+Code\s*=\s*"([a-z_]+)"', src, re.M))
    rows = re.findall(r'\{[\w.]+,\s*(Code\w+),\s*(http\.Status\w+|\d+)\}', src)
    status = {}
    for const, st in rows:
        if st.isdigit():
            status[consts[const]] = int(st)
        else:
            name = re.sub(r"(?<!^)([A-Z])", r"_\1", st[len("http.Status"):]).upper()
            status[consts[const]] = http.HTTPStatus[name].value
    return consts, status


class ErrorTableTest(unittest.TestCase):
    def test_every_go_code_has_a_class_and_the_same_status(self):
        consts, status = go_table()
        self.assertGreater(len(consts), 20, "api/errors.go was not read")
        self.assertGreater(len(status), 15)
        for code in consts.values():
            self.assertIn(code, ERRORS, f"code {code} of api/errors.go has no row in kernelbox/errors.py")
        for code, st in status.items():
            self.assertEqual(ERRORS[code][0], st, f"status of {code}")
        for code in ERRORS:
            self.assertIn(code, consts.values(), f"kernelbox/errors.py has {code}, api/errors.go does not")

    def test_codes_without_a_sentinel_match_the_docs(self):
        # The codes the Go table has no row for: their statuses as docs/http-api.md states them.
        want = {"unauthorized": 401, "cross_origin": 403, "forbidden_host": 403, "internal": 500,
                "too_many_connections": 503}
        for code, st in want.items():
            self.assertEqual(ERRORS[code][0], st)

    def test_error_for(self):
        e = error_for(404, "not_found", "no session")
        self.assertIsInstance(e, kernelbox.NotFound)
        self.assertIsInstance(e, APIError)
        self.assertEqual((e.status, e.code, e.message), (404, "not_found", "no session"))
        self.assertIs(type(error_for(500, "brand_new", "x")), APIError)
        self.assertEqual(len({cls for _, cls in ERRORS.values()}), len(ERRORS), "one class per code")


if __name__ == "__main__":
    unittest.main()
