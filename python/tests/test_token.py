"""token_for reads the serve runtime file as internal/runtimefile's Lookup does (no server needed)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import unittest

import kbserve  # noqa: F401 (puts the package on sys.path)

from kernelbox._transport import token_for

URL = "http://127.0.0.1:8799"


class TokenForTest(unittest.TestCase):
    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="kbpy-tok-")
        self.addCleanup(shutil.rmtree, self.base, True)
        self.dir = os.path.join(self.base, "kernelbox")
        os.mkdir(self.dir, 0o700)
        old = os.environ.get("XDG_RUNTIME_DIR")
        os.environ["XDG_RUNTIME_DIR"] = self.base
        self.addCleanup(lambda: os.environ.__setitem__("XDG_RUNTIME_DIR", old) if old is not None
                        else os.environ.pop("XDG_RUNTIME_DIR", None))
        self.path = os.path.join(self.dir, "server-" + hashlib.sha256(URL.encode()).hexdigest()[:16] + ".json")

    def write(self, info, mode=0o600):
        with open(self.path, "w") as f:
            json.dump(info, f)
        os.chmod(self.path, mode)

    def test_found_and_refused(self):
        self.write({"url": URL, "token": "t0k", "pid": os.getpid()})
        self.assertEqual(token_for(URL), "t0k")
        self.assertEqual(token_for(URL + "/"), "t0k", "one trailing slash is the same URL")
        self.assertEqual(token_for("http://localhost:8799"), "", "another name is another file")
        os.chmod(self.path, 0o644)
        self.assertEqual(token_for(URL), "", "a file others can read is not trusted")
        self.write({"url": "http://127.0.0.1:1", "token": "t0k", "pid": os.getpid()})
        self.assertEqual(token_for(URL), "", "the file must name the URL")
        self.write({"url": URL, "token": "t0k", "pid": 2 ** 22 + 12345})
        self.assertEqual(token_for(URL), "", "a dead server's token is not used")
        self.write({"url": URL, "token": "t0k", "pid": os.getpid()})
        os.chmod(self.dir, 0o750)
        self.assertEqual(token_for(URL), "", "a runtime dir others can enter is not trusted")
        os.chmod(self.dir, 0o700)
        target = self.path + ".real"
        os.rename(self.path, target)
        os.symlink(target, self.path)
        self.assertEqual(token_for(URL), "", "a link is not followed")


if __name__ == "__main__":
    unittest.main()
