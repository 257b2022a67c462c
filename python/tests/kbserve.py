"""Test helper: a real `kernelbox serve` in a temporary directory.

The binary is $KERNELBOX_BIN when set, else built once per process with
`go build` from the repository. Integration tests skip when Jupyter (or Docker)
is missing unless KERNELBOX_REQUIRE_JUPYTER=1 (KERNELBOX_REQUIRE_DOCKER=1) is set,
as internal/testkit/testenv does, so CI cannot pass by skipping.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYDIR)
sys.path.insert(0, PYDIR)

import kernelbox  # noqa: E402
import kernelbox._transport  # noqa: E402

_bin_lock = threading.Lock()
_bin: Optional[str] = None
JUPYTER_PYTHON = "/usr/bin/python3"


def binary() -> str:
    """Return the kernelbox binary to test, building it once."""
    global _bin
    with _bin_lock:
        if _bin:
            return _bin
        if os.environ.get("KERNELBOX_BIN"):
            _bin = os.environ["KERNELBOX_BIN"]
            return _bin
        d = tempfile.mkdtemp(prefix="kbpy-bin-")
        atexit.register(shutil.rmtree, d, True)
        out = os.path.join(d, "kernelbox")
        env = dict(os.environ)
        env["PATH"] = env.get("PATH", "") + ":/usr/local/go/bin"
        subprocess.run(["go", "build", "-o", out, "./cmd/kernelbox"], cwd=REPO, env=env, check=True)
        _bin = out
        return out


def require_jupyter(tc: Optional[unittest.TestCase] = None) -> None:
    """Skip (or fail under KERNELBOX_REQUIRE_JUPYTER=1) when Debian's Jupyter is missing."""
    ok = subprocess.run([JUPYTER_PYTHON, "-c", "import jupyter_server, ipykernel"],
                        capture_output=True).returncode == 0 if os.path.exists(JUPYTER_PYTHON) else False
    if ok:
        return
    msg = f"{JUPYTER_PYTHON} has no jupyter_server/ipykernel"
    if os.environ.get("KERNELBOX_REQUIRE_JUPYTER") == "1":
        raise AssertionError(msg + " and KERNELBOX_REQUIRE_JUPYTER=1")
    raise unittest.SkipTest(msg)


def docker_ready() -> bool:
    """Report whether a Docker daemon and the kernel image are there; fail when required and not."""
    ok = shutil.which("docker") is not None and subprocess.run(
        ["docker", "image", "inspect", "kernelbox/kernel:latest"], capture_output=True).returncode == 0
    if not ok and os.environ.get("KERNELBOX_REQUIRE_DOCKER") == "1":
        raise AssertionError("docker or kernelbox/kernel:latest missing and KERNELBOX_REQUIRE_DOCKER=1")
    return ok


def free_port() -> int:
    """Return a free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TimedTest(unittest.TestCase):
    """A TestCase that logs each test's run time (the report names them)."""

    def setUp(self):
        self._t0 = time.monotonic()
        self.addCleanup(lambda: sys.stderr.write(f"\n  [{self.id()}: {time.monotonic() - self._t0:.2f} s] "))


class Serve:
    """One `kernelbox serve` process; start() it, then use .url / .client()."""

    def __init__(self, backend: str = "local", tcp: bool = False, token: Optional[str] = None,
                 extra: Optional[List[str]] = None, port: int = 0, workspace: Optional[str] = None):
        self.dir = tempfile.mkdtemp(prefix="kbpy-serve-")
        self.tmp = tempfile.mkdtemp(prefix="kbt", dir="/tmp")
        self.backend, self.tcp, self.token = backend, tcp, token
        self.extra = list(extra or [])
        self.workspace = workspace or os.path.join(self.dir, "ws")
        self.port = port or (free_port() if tcp else 0)
        self.url = f"http://127.0.0.1:{self.port}" if tcp else "unix:" + os.path.join(self.dir, "kb.sock")
        self.proc: Optional[subprocess.Popen] = None
        self.log = os.path.join(self.dir, "serve.log")

    def start(self, wait: float = 60.0) -> "Serve":
        """Start serve and wait until /healthz answers."""
        listen = f"127.0.0.1:{self.port}" if self.tcp else self.url
        args = [binary(), "serve", "--backend", self.backend, "--listen", listen, "--workspace", self.workspace,
                "--no-dashboard", "--idle-timeout", "0", "--log-level", "warn",
                # Nothing outlives the test's serve (the default keeps docker sessions).
                "--on-stop", "close"]
        if self.backend == "local":
            args += ["--python", JUPYTER_PYTHON]
        if "--disk-quota" not in self.extra:
            # No loop-mounted session disks (as root) unless a test asks: a serve killed
            # with SIGKILL would leave them mounted, and making them costs time.
            args += ["--disk-quota", "0"]
        if self.token:
            args += ["--token", self.token]
        env = dict(os.environ)
        env.pop("KERNELBOX_TOKEN", None)
        # serve's Jupyter runtime dirs (kernelspec included), short enough for unix sockets
        env["TMPDIR"] = self.tmp
        env["XDG_RUNTIME_DIR"] = os.path.join(self.dir, "run")
        os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
        self.runtime_dir = env["XDG_RUNTIME_DIR"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args + self.extra, stdout=log, stderr=log, env=env, cwd=self.dir,
                                         start_new_session=True)
        deadline = time.monotonic() + wait
        c = kernelbox.Client(self.url, token="", timeout=2)  # /healthz is a probe: no token
        while True:
            try:
                c.health()
                c.close()
                return self
            except kernelbox.TransportError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"serve did not start: {self.logtext()}")
                time.sleep(0.05)

    def client(self, **kw) -> kernelbox.Client:
        """Return a client of this server (with its token: given, or the one serve generated)."""
        kw.setdefault("token", self.token or self.generated_token())
        return kernelbox.Client(self.url, **kw)

    def generated_token(self) -> str:
        """Return the token serve generated and kept in its runtime file ("" when none)."""
        if not self.tcp:
            return ""
        old = os.environ.get("XDG_RUNTIME_DIR")
        os.environ["XDG_RUNTIME_DIR"] = self.runtime_dir
        try:
            return kernelbox._transport.token_for(self.url)
        finally:
            if old is None:
                del os.environ["XDG_RUNTIME_DIR"]
            else:
                os.environ["XDG_RUNTIME_DIR"] = old

    def logtext(self) -> str:
        """Return serve's output so far."""
        try:
            with open(self.log, "rb") as f:
                return f.read()[-4000:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop serve (SIGTERM: it closes its kernels) and wait for it."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def cleanup(self) -> None:
        """Stop serve and remove its directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
