"""Scoped tokens through kernelbox.Client against a real `kernelbox serve --backend local`."""

from __future__ import annotations

import unittest

import kbserve
from kbserve import Serve

import kernelbox

S: Serve


def setUpModule():
    global S
    kbserve.require_jupyter()
    S = Serve(tcp=True, token="py-admin-token").start()


def tearDownModule():
    if globals().get("S"):
        S.cleanup()


class ScopedTokenTest(kbserve.TimedTest):
    def setUp(self):
        super().setUp()
        self.admin = S.client()
        self.addCleanup(self.admin.close)

    def test_scoped_client_reaches_its_session_only(self):
        a = self.admin.scoped("py-a", name="py-agent-a")
        self.addCleanup(a.close)
        b = self.admin.scoped("py-b", prefix=True)
        self.addCleanup(b.close)
        self.assertEqual(a.execute("py-a", "x = 40; x + 2").result, "42")
        self.assertEqual(b.execute("py-b-1", "1 + 1").result, "2", "b's prefix lets it create py-b-1")
        self.assertEqual({s.id for s in a.sessions()}, {"py-a"})
        for attack in (lambda: b.execute("py-a", "print(x)"), lambda: b.session("py-a"),
                       lambda: b.download("py-a", "x"), lambda: b.fork("py-b", "py-a-copy"),
                       lambda: b.close_session("py-a")):
            with self.assertRaises(kernelbox.NotFound):
                attack()
        with self.assertRaises(kernelbox.PermissionDenied):
            a.create_token("wider", ["*"])
        me = a.whoami()
        self.assertFalse(me["admin"])
        self.assertEqual(me["name"], "py-agent-a")
        self.assertTrue(self.admin.whoami()["admin"])
        listed = {t["id"]: t for t in self.admin.tokens()}
        self.assertIn(a.token_id, listed)
        self.assertNotIn("token", listed[a.token_id], "a listing never carries a secret")
        self.admin.revoke_token(a.token_id)
        with self.assertRaises(kernelbox.Unauthorized):
            a.sessions()
        with self.assertRaises(kernelbox.NotFound):
            self.admin.revoke_token(a.token_id)

    def test_deepagents_scoped_sandbox(self):
        from kernelbox.deepagents import KernelboxSandboxClient
        sc = KernelboxSandboxClient(S.url, "py-admin-token")
        mine = sc.create(scoped=True)
        other = sc.create(scoped=True)
        self.assertNotEqual(mine.client.token_id, other.client.token_id)
        self.assertEqual(mine.execute("echo hi").output.strip(), "hi")
        self.assertEqual({s.id for s in mine.client.sessions()}, {mine.id}, "its key sees its own sandbox only")
        with self.assertRaises(kernelbox.NotFound):
            mine.client.execute(other.id, "1")
        key = mine.client.token_id
        sc.delete(sandbox_id=mine.id)
        self.assertNotIn(key, {t["id"] for t in self.admin.tokens()}, "delete revokes the sandbox's key")
        sc.delete(sandbox_id=other.id)

    def test_rate_limited(self):
        t = self.admin.create_token("py-rated", ["py-r"], rate_per_minute=1)
        c = kernelbox.Client(S.url, t["token"])
        self.addCleanup(c.close)
        c.execute("py-r", "1")
        with self.assertRaises(kernelbox.RateLimited):
            c.execute("py-r", "1")


if __name__ == "__main__":
    unittest.main()
