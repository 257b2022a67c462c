"""Streams across broken connections: resumed through a flaky proxy, and a server killed mid-stream."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import kbserve
from kbserve import Serve

import kernelbox

S: Serve

CELL = "import time\nfor i in range(40):\n print(i, flush=True); time.sleep(0.05)"


def setUpModule():
    global S
    kbserve.require_jupyter()
    S = Serve(tcp=True, token="tok-streams").start()


def tearDownModule():
    if globals().get("S"):
        S.cleanup()


class Proxy:
    """A loopback TCP proxy to port whose connections can be cut and whose listener can be paused."""

    def __init__(self, port: int):
        self.target = port
        self.port = kbserve.free_port()
        self.conns = []
        self.lock = threading.Lock()
        self.open = threading.Event()
        self.open.set()
        self.ln = socket.create_server(("127.0.0.1", self.port))
        self.ln.settimeout(0.1)
        self.stop = False
        self.th = threading.Thread(target=self._accept, daemon=True)
        self.th.start()

    def _accept(self):
        while not self.stop:
            try:
                c, _ = self.ln.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if not self.open.is_set():
                c.close()  # "the server is down": refused at once
                continue
            u = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        """Break every connection now."""
        with self.lock:
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self.conns = []

    def close(self):
        self.stop = True
        self.cut()
        self.ln.close()


class StreamFaultsTest(kbserve.TimedTest):
    def test_stream_resumes_after_the_connection_drops(self):
        p = Proxy(S.port)
        self.addCleanup(p.close)
        c = kernelbox.Client(f"http://127.0.0.1:{p.port}", token="tok-streams")
        self.addCleanup(c.close)
        c.execute("s-resume", "1")  # the kernel is up before the timed part
        got, ids = [], []
        st = c.execute_stream("s-resume", CELL)
        for ev in st:
            if ev.type == "stream":
                got.append(ev.text)
                ids.append(ev.id)
                if len(got) == 5:
                    p.open.clear()  # the "server" is away for a moment
                    p.cut()
                    threading.Timer(0.5, p.open.set).start()
        self.assertEqual("".join(got), "".join(f"{i}\n" for i in range(40)), "every line once, in order")
        self.assertEqual(ids, sorted(set(ids)))
        self.assertEqual(st.result.status, "ok")
        self.assertGreaterEqual(c.connections_opened, 3, "the stream reconnected")

    def test_server_killed_mid_stream(self):
        s = Serve(tcp=True, token="tok-kill").start()
        self.addCleanup(s.cleanup)
        c = s.client()
        self.addCleanup(c.close)
        st = c.execute_stream("s-kill", CELL, max_fails=2)
        seen = 0
        with self.assertRaises(kernelbox.StreamError) as cm:
            for ev in st:
                if ev.type == "stream":
                    seen += 1
                    if seen == 3:
                        os.killpg(s.proc.pid, signal.SIGKILL)  # serve and the kernels it started
                        s.proc.wait()
        e = cm.exception
        self.assertTrue(e.call_id)
        self.assertGreaterEqual(e.last_event_id, 3)
        self.assertIn("gave up", str(e))
        self.assertIsInstance(e, ConnectionError)
        # A later attach to a server that is gone fails the same clear way, fast.
        t0 = time.monotonic()
        with self.assertRaises(kernelbox.StreamError):
            list(c.attach(e.call_id, after=e.last_event_id, max_fails=1))
        self.assertLess(time.monotonic() - t0, 10)


if __name__ == "__main__":
    import unittest
    unittest.main()
