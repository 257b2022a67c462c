"""kernelbox.Client against a real `kernelbox serve --backend local` (one per module)."""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import threading
import time
import unittest

import kbserve
from kbserve import Serve

import kernelbox

S: Serve
T: Serve  # TCP, generated token, small limits


def setUpModule():
    global S, T
    kbserve.require_jupyter()
    S = Serve(extra=["--templates", _templates(), "--warm", "2"]).start()
    T = Serve(tcp=True, extra=["--conn-idle-timeout", "1s", "--max-sessions", "2",
                               "--max-notebook-bytes", "2000"]).start()


def tearDownModule():
    for s in (globals().get("S"), globals().get("T")):
        if s:
            s.cleanup()


def _templates() -> str:
    import tempfile
    d = tempfile.mkdtemp(prefix="kbpy-tpl-")
    atexit.register(shutil.rmtree, d, True)
    p = os.path.join(d, "templates.json")
    with open(p, "w") as f:
        json.dump({"templates": [{"name": "plain", "description": "no preload", "kernel": "python3"},
                                 {"name": "preloaded", "kernel": "python3", "preload": "ANSWER = 42"}]}, f)
    return p


class ExecuteTest(kbserve.TimedTest):
    def setUp(self):
        super().setUp()
        self.c = S.client()
        self.addCleanup(self.c.close)

    def test_execute_result_fields_and_keepalive(self):
        r = self.c.execute("c-exec", "import sys\nprint('out'); print('err', file=sys.stderr)\n6*7")
        self.assertEqual((r.status, r.stdout, r.stderr, r.result), ("ok", "out\n", "err\n", "42"), r)
        self.assertTrue(r.ok)
        self.assertFalse(r.state_lost)
        self.assertEqual(r.outputs[-1]["output_type"], "execute_result")
        r = self.c.execute("c-exec", "1/0")
        self.assertEqual(r.status, "error")
        self.assertEqual(r.error.ename, "ZeroDivisionError")
        r = self.c.execute("c-exec", "open('outputs/a.txt','w').write('hi')")
        self.assertEqual([a.name for a in r.artifacts], ["a.txt"])
        self.assertEqual(self.c.download_artifact("c-exec", "a.txt"), b"hi")
        self.assertIn("a.txt", [a.name for a in self.c.artifacts("c-exec")])
        before = self.c.connections_opened
        t0 = time.monotonic()
        for i in range(20):
            self.assertEqual(self.c.execute("c-exec", f"{i}+1").result, str(i + 1))
        print(f"\n  20 trivial cells on one kept connection: {(time.monotonic() - t0) / 20 * 1000:.2f} ms each")
        self.assertEqual(self.c.connections_opened, before, "each call must reuse the kept connection")

    def test_concurrent_calls_do_not_wait_for_each_other(self):
        for s in ("c-par1", "c-par2"):
            self.c.execute(s, "1")  # kernels up before the timed part
        before = self.c.connections_opened
        out = {}

        def run(s):
            out[s] = self.c.execute(s, "import time; time.sleep(1.5); 'done'").result

        t0 = time.monotonic()
        ts = [threading.Thread(target=run, args=(s,)) for s in ("c-par1", "c-par2")]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        took = time.monotonic() - t0
        print(f"\n  two 1.5 s cells in two threads through one client: {took:.2f} s")
        self.assertEqual(out, {"c-par1": "'done'", "c-par2": "'done'"})
        self.assertLess(took, 2.9, "the second call waited for the first")
        self.assertLessEqual(self.c.connections_opened - before, 1, "one extra connection for the second thread")
        n = self.c.connections_opened
        for s in ("c-par1", "c-par2", "c-par1"):
            self.c.execute(s, "1")
        self.assertEqual(self.c.connections_opened, n, "kept connections are reused")

    def test_execute_timeout_is_a_result(self):
        r = self.c.execute("c-exec", "import time; time.sleep(30)", timeout=1)
        self.assertEqual(r.status, "timeout")
        self.assertEqual(r.error.ename, "Timeout")

    def test_stream_shows_output_before_the_cell_ends(self):
        t0 = time.monotonic()
        firsts, seen = None, []
        with self.c.execute_stream("c-stream", "import time\nfor i in range(3):\n print(i, flush=True); time.sleep(0.7)") as st:
            for ev in st:
                if ev.type == "stream":
                    firsts = firsts or time.monotonic() - t0
                    seen.append(ev.text)
            total = time.monotonic() - t0
        self.assertEqual("".join(seen), "0\n1\n2\n")
        self.assertEqual(st.result.status, "ok")
        self.assertTrue(st.call_id)
        print(f"\n  first output after {firsts:.2f} s, cell ended after {total:.2f} s")
        self.assertLess(firsts, total - 1.0, "output must arrive before the cell ends")

    def test_detached_call_attach_and_resume(self):
        d = self.c.start("c-detach", "for i in range(5): print(i)")
        self.assertEqual(d.session_id, "c-detach")
        st = self.c.attach(d.call_id)
        evs = list(st)
        self.assertEqual(st.result.stdout, "0\n1\n2\n3\n4\n")
        mid = [e for e in evs if e.type == "stream"][0].id
        again = self.c.attach(d.call_id, after=mid)
        later = list(again)
        self.assertTrue(all(e.id > mid for e in later), "resume must not repeat events")
        self.assertEqual(again.result.stdout, st.result.stdout)
        info = self.c.call(d.call_id)
        self.assertEqual((info.state, info.status), ("done", "ok"))
        self.assertEqual(info.result.stdout, "0\n1\n2\n3\n4\n")
        self.assertIn(d.call_id, [c.call_id for c in self.c.calls("c-detach")])
        with self.assertRaises(kernelbox.CallFinished):
            self.c.cancel(d.call_id)
        with self.assertRaises(kernelbox.NotFound):
            self.c.call("no-such-call")

    def test_cancel_and_interrupt(self):
        d = self.c.start("c-cancel", "import time; time.sleep(60)", timeout=30)
        _wait_state(self.c, d.call_id, "running")
        self.c.cancel(d.call_id)
        self.assertNotEqual(self.c.attach(d.call_id).wait().status, "ok")
        d = self.c.start("c-cancel", "import time; print('go', flush=True); time.sleep(60)", timeout=30)
        st = self.c.attach(d.call_id)
        for ev in st:
            if ev.type == "stream":  # the code runs: now interrupt it
                break
        st.close()
        self.c.interrupt("c-cancel")
        r = self.c.attach(d.call_id).wait()
        self.assertEqual((r.status, r.error.ename), ("error", "KeyboardInterrupt"))


def _close_quietly(c, s):
    try:
        c.close_session(s)
    except kernelbox.NotFound:
        pass


def _wait_state(c, call_id, state, limit=60):
    deadline = time.monotonic() + limit
    while c.call(call_id).state != state:
        if time.monotonic() > deadline:
            raise AssertionError(f"call {call_id} never {state}")
        time.sleep(0.05)


class SessionsTest(kbserve.TimedTest):
    def setUp(self):
        super().setUp()
        self.c = S.client()
        self.addCleanup(self.c.close)

    def test_templates_create_list_reset_close(self):
        names = [t.name for t in self.c.templates()]
        self.assertIn("plain", names)
        self.assertIn("preloaded", names)
        info = self.c.create_session("c-sess", "preloaded")
        self.assertEqual((info.id, info.template), ("c-sess", "preloaded"))
        self.assertEqual(self.c.create_session("c-sess", "preloaded").template, "preloaded")
        with self.assertRaises(kernelbox.TemplateMismatch) as cm:
            self.c.create_session("c-sess", "plain")
        self.assertEqual(cm.exception.status, 409)
        self.assertIn("c-sess", [s.id for s in self.c.sessions()])
        self.assertEqual(self.c.execute("c-sess", "x = ANSWER; x").result, "42")
        self.c.reset_session("c-sess")
        r = self.c.execute("c-sess", "x")
        self.assertEqual(r.error.ename, "NameError")
        self.assertEqual(self.c.session("c-sess").template, "preloaded")
        self.c.close_session("c-sess")
        with self.assertRaises(kernelbox.NotFound):
            self.c.session("c-sess")
        with self.assertRaises(kernelbox.InvalidRequest):
            self.c.execute("bad id!", "1")

    def test_hibernate_resume_fork(self):
        self.c.execute("c-hib", "x = [1, 2]\ndef f(a): return a * 2")
        info = self.c.hibernate("c-hib")
        self.assertEqual(info.state, "hibernated")
        self.c.fork("c-hib", "c-hib-b")
        r = self.c.execute("c-hib-b", "x.append(3); f(len(x))")
        self.assertEqual(r.result, "6", r)
        res = self.c.resume("c-hib")
        self.assertIn("x", res["state_restored"]["restored"])
        self.assertEqual(self.c.execute("c-hib", "x").result, "[1, 2]", "the original is untouched")
        with self.assertRaises(kernelbox.NotFound):
            self.c.hibernate("c-none")
        for s in ("c-hib", "c-hib-b"):
            self.c.close_session(s)

    def test_health_and_notebook(self):
        h = self.c.health()
        self.assertEqual((h.status, h.backend), ("ok", "local"))
        nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
            {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "n = 1", "outputs": [],
             "execution_count": None},
            {"cell_type": "code", "metadata": {}, "source": "print(n * 2)", "outputs": [], "execution_count": None}]}
        run = self.c.run_notebook(nb, parameters={"n": 21})
        self.assertEqual(run.status, "ok", run)
        out = run.notebook["cells"][-1]["outputs"][0]["text"]
        self.assertEqual("".join(out) if isinstance(out, list) else out, "42\n")


class FilesTest(kbserve.TimedTest):
    def setUp(self):
        super().setUp()
        self.c = S.client()
        self.addCleanup(self.c.close)

    def test_upload_download_list_remove(self):
        self.assertEqual(self.c.upload("c-files", "d/a.txt", b"hello"), 5)
        self.assertEqual(self.c.upload("c-files", "d/stream.bin", io.BytesIO(b"z" * (3 << 20))), 3 << 20)
        self.assertEqual(self.c.download("c-files", "d/a.txt"), b"hello")
        self.assertEqual(len(self.c.download("c-files", "d/stream.bin")), 3 << 20)
        names = [(e.name, e.type) for e in self.c.list_files("c-files", "d").entries]
        self.assertEqual(names, [("a.txt", "file"), ("stream.bin", "file")])
        self.assertTrue(self.c.list_files("c-files", "d", max=1).truncated)
        with self.assertRaises(kernelbox.FileExists):
            self.c.upload("c-files", "d/a.txt", b"x", no_overwrite=True)
        with self.assertRaises(kernelbox.IsDirectory):
            self.c.download("c-files", "d")
        with self.assertRaises(kernelbox.IsDirectory):
            self.c.remove("c-files", "d")
        self.c.remove("c-files", "d/a.txt")
        with self.assertRaises(kernelbox.NotFound):
            self.c.download("c-files", "d/a.txt")
        self.c.remove("c-files", "d", recursive=True)
        self.assertEqual(self.c.list_files("c-files").entries[0].name, "inputs")

    def test_bad_paths(self):
        self.c.upload("c-files2", "ok.txt", b"1")
        for bad in ("../x", "a/../../x", "a\x00b", "/etc/passwd", "./x"):
            with self.subTest(bad=bad):
                with self.assertRaises(kernelbox.InvalidPath):
                    self.c.upload("c-files2", bad, b"x")
                with self.assertRaises(kernelbox.InvalidPath):
                    self.c.download("c-files2", bad)

    def test_batch_per_file_results(self):
        r = self.c.batch("c-batch", [("a.txt", b"a"), ("../b", b"b"), ("a.txt", b"again", True), ("c/d.txt", b"d")],
                         ["a.txt", "c", "nope", "c/d.txt"])
        self.assertEqual([u.status for u in r.uploads], ["ok", "invalid_path", "exists", "ok"])
        self.assertEqual([d.status for d in r.downloads], ["ok", "is_directory", "not_found", "ok"])
        self.assertEqual((r.downloads[0].content, r.downloads[3].content), (b"a", b"d"))


class FaultsTest(kbserve.TimedTest):
    def test_wrong_token_runtime_file_and_env(self):
        with self.assertRaises(kernelbox.Unauthorized) as cm, kernelbox.Client(T.url, token="wrong") as c:
            c.sessions()
        self.assertEqual(cm.exception.status, 401)
        old = dict(os.environ)
        try:
            os.environ["XDG_RUNTIME_DIR"] = T.runtime_dir  # where serve kept its generated token
            os.environ.pop("KERNELBOX_TOKEN", None)
            os.environ["KERNELBOX_SERVER"] = T.url
            c = kernelbox.Client()
            self.assertEqual(c.server, T.url)
            self.assertIsInstance(c.sessions(), list)
            tok = c._t.token
            os.environ["KERNELBOX_TOKEN"] = tok
            os.environ["XDG_RUNTIME_DIR"] = "/nonexistent"
            self.assertIsInstance(kernelbox.Client().sessions(), list)
            os.environ.pop("KERNELBOX_TOKEN")
            with self.assertRaises(kernelbox.Unauthorized):
                kernelbox.Client().sessions()
        finally:
            os.environ.clear()
            os.environ.update(old)

    def test_unreachable(self):
        for url in ("unix:/nonexistent/kb.sock", f"http://127.0.0.1:{kbserve.free_port()}"):
            with self.subTest(url=url), self.assertRaises(kernelbox.TransportError):
                kernelbox.Client(url, token="x", timeout=5).sessions()
            with self.assertRaises(ConnectionError):  # also a builtin ConnectionError
                kernelbox.Client(url, token="x", timeout=5).execute("s", "1")

    def test_reconnects_after_the_server_closed_the_idle_connection(self):
        c = T.client()
        c.sessions()
        time.sleep(1.6)  # past --conn-idle-timeout 1s
        c.sessions()
        c.create_session("t-idle")  # a POST after the idle close
        c.close_session("t-idle")
        self.assertGreaterEqual(c.connections_opened, 2, "the closed connection was replaced")

    def test_413_429_with_the_servers_message(self):
        c = T.client()
        with self.assertRaises(kernelbox.TooLarge) as cm:
            c.run_notebook({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
                {"cell_type": "code", "metadata": {}, "source": "x" * 5000, "outputs": [], "execution_count": None}]})
        self.assertEqual(cm.exception.status, 413)
        self.assertIn("max-notebook-bytes", cm.exception.message)
        for s in ("t-a", "t-b", "t-c"):
            self.addCleanup(lambda s=s: _close_quietly(c, s))
            try:
                c.create_session(s)
            except kernelbox.TooManySessions as e:
                self.assertEqual(e.status, 429)
                self.assertTrue(e.message)
                break
        else:
            self.fail("a third session past --max-sessions 2 was created")

    def test_error_answers_are_read_within_a_bound(self):
        import http.server

        class Big(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(500)
                self.send_header("Content-Length", str(8 << 20))
                self.end_headers()
                try:
                    self.wfile.write(b"x" * (8 << 20))
                except OSError:
                    pass

            def log_message(self, *a):
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Big)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        c = kernelbox.Client(f"http://127.0.0.1:{srv.server_port}", token="x", timeout=10)
        with self.assertRaises(kernelbox.APIError) as cm:
            c.sessions()
        self.assertEqual(cm.exception.status, 500)
        self.assertEqual(len(cm.exception.message), 1 << 20, "an error body is read up to 1 MiB, no more")
        c.close()

    def test_error_answers_keep_the_connection(self):
        c = S.client()
        self.addCleanup(c.close)
        c.sessions()
        for _ in range(3):
            with self.assertRaises(kernelbox.NotFound):
                c.session("no-such-session")
        self.assertEqual(c.connections_opened, 1)

    def test_503_disabled(self):
        n = Serve(backend="none").start()
        self.addCleanup(n.cleanup)
        with self.assertRaises(kernelbox.Disabled) as cm:
            n.client().execute("s", "1")
        self.assertEqual(cm.exception.status, 503)


if __name__ == "__main__":
    unittest.main()
