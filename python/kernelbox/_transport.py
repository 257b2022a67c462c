"""The HTTP transport: kept-alive connections (one per caller at a time), over TCP or a unix socket.

A kept connection the server closed while idle (its --conn-idle-timeout) is found
before the next request is sent (the socket reads as closed) and replaced; an
idempotent request (GET, PUT, DELETE) whose kept connection broke before any answer
byte is sent once more on a fresh one. A POST is never sent twice: its failure is
raised as :class:`TransportError`.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import select
import socket
import stat
import threading
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import urlsplit

from .errors import TransportError, error_for

DEFAULT_SERVER = "http://127.0.0.1:8700"

#: The most connections a client keeps open while idle (one per thread that used it at once).
MAX_IDLE = 4

# The most of an error answer's body that is read.
_MAX_ERROR_BODY = 1 << 20


class _OneWrite:
    """Sends a request's head and a bytes body in one write: http.client writes them in
    two (two system calls, two segments, and the server woken twice for one request). A
    streamed body is sent as http.client sends it."""

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        if not isinstance(message_body, (bytes, bytearray)) or encode_chunked:
            super()._send_output(message_body, encode_chunked)  # type: ignore[misc]
            return
        buf = self._buffer  # type: ignore[attr-defined]
        buf.extend((b"", b""))
        head = b"\r\n".join(buf)
        del buf[:]
        self.send(head + message_body)  # type: ignore[attr-defined]


class _TCPConnection(_OneWrite, http.client.HTTPConnection):
    """An HTTPConnection writing each request once (http.client sets TCP_NODELAY itself)."""


class _TLSConnection(_OneWrite, http.client.HTTPSConnection):
    """An HTTPSConnection writing each request once."""


class _UnixConnection(_OneWrite, http.client.HTTPConnection):
    """An HTTPConnection to a unix socket."""

    def __init__(self, path: str, timeout: Optional[float]):
        super().__init__("kernelbox", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


def runtime_dir() -> str:
    """Return the per-user runtime directory `kernelbox serve` keeps its tokens in."""
    d = os.environ.get("XDG_RUNTIME_DIR")
    if d:
        return os.path.join(d, "kernelbox")
    return os.path.join(os.path.expanduser("~"), ".local", "share", "kernelbox", "runtime")


def token_for(url: str) -> str:
    """Return the token a `kernelbox serve` run by this user generated for url, or "".

    It reads the 0600 runtime file the server keeps (as internal/runtimefile's Lookup
    does): the directory must be this user's with no group or other access, the file
    must not be a link nor readable by others, must name url, and its server must be
    alive.
    """
    d = runtime_dir()
    try:
        st = os.lstat(d)
    except OSError:
        return ""
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return ""
    norm = url.strip()
    norm = norm[:-1] if norm.endswith("/") else norm  # as runtimefile.Normalize
    p = os.path.join(d, "server-" + hashlib.sha256(norm.encode()).hexdigest()[:16] + ".json")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if os.fstat(f.fileno()).st_mode & 0o077:
            return ""
        try:
            info = json.loads(f.read(1 << 16))
        except ValueError:
            return ""
    if not isinstance(info, dict) or info.get("url") != norm:
        return ""
    pid = info.get("pid") or 0
    if pid > 0:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return ""
        except PermissionError:
            pass
    return str(info.get("token", ""))


def parse_server(server: str) -> Tuple[str, str, int, str]:
    """Split server into (kind, host, port, socket path); kind is http, https or unix."""
    if server.startswith("unix:"):
        path = server[len("unix:"):]
        if not path:
            raise ValueError("kernelbox: empty unix socket path")
        return "unix", "", 0, path
    u = urlsplit(server)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"kernelbox: server {server!r} is not an http(s) URL or unix:PATH")
    port = u.port or (443 if u.scheme == "https" else 80)
    return u.scheme, u.hostname, port, ""


class Transport:
    """Sends requests on kept-alive connections; safe for concurrent use.

    One caller at a time uses one connection, the next request reuses it; callers in
    several threads at once each get one (at most :data:`MAX_IDLE` are kept idle).
    """

    def __init__(self, server: str, token: str, timeout: Optional[float]):
        self.server = server
        self.kind, self.host, self.port, self.path = parse_server(server)
        self.token = token
        self.timeout = timeout
        self._auth = {"Authorization": "Bearer " + token} if token else {}
        self._lock = threading.Lock()
        self._idle: List[http.client.HTTPConnection] = []
        self.connections = 0  # how many connections were opened (for tests and the benchmark)

    def new_connection(self, timeout: Optional[float] = None) -> http.client.HTTPConnection:
        """Return a new, not yet connected, connection to the server."""
        t = self.timeout if timeout is None else timeout
        with self._lock:
            self.connections += 1
        if self.kind == "unix":
            return _UnixConnection(self.path, t)
        if self.kind == "https":
            return _TLSConnection(self.host, self.port, timeout=t)
        return _TCPConnection(self.host, self.port, timeout=t)

    def headers(self, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """Return the request headers: the token, then extra."""
        h = dict(self._auth)
        if extra:
            h.update(extra)
        return h

    def close(self) -> None:
        """Close the kept connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def _take(self) -> Tuple[http.client.HTTPConnection, bool]:
        """Return a kept connection (reused: True) or a new one."""
        while True:
            with self._lock:
                c = self._idle.pop() if self._idle else None
            if c is None:
                return self.new_connection(), False
            if c.sock is None:
                continue
            try:
                readable, _, _ = select.select([c.sock], [], [], 0)
            except (OSError, ValueError):
                readable = [c.sock]
            if not readable:
                return c, True
            c.close()  # closed by the server while idle (or stray bytes): not reusable

    def _give(self, c: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(c)
                return
        c.close()

    def request(self, method: str, path: str, body: Any = None,
                headers: Optional[Dict[str, str]] = None) -> Tuple[int, Mapping[str, str], bytes]:
        """Send one request on a kept connection and return (status, headers, body).

        The headers are the answer's, looked up without regard to case.

        Non-2xx answers raise the error table's exception; failures to connect or
        broken connections raise TransportError.
        """
        hdr = self.headers(headers)
        for attempt in (0, 1):
            conn, reused = self._take()
            try:
                conn.request(method, path, body=body, headers=hdr)
                resp = conn.getresponse()
                # An error answer is read only so far; a longer one costs its connection.
                data = resp.read(_MAX_ERROR_BODY) if resp.status >= 300 else resp.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                conn.close()
                retry = reused and attempt == 0 and method in ("GET", "PUT", "DELETE", "HEAD")
                if retry and (body is None or isinstance(body, (bytes, bytearray))):
                    continue
                raise TransportError(f"kernelbox: {method} {path}: connection to {self.server} broke: {e}") from e
            except BaseException as e:
                conn.close()
                if isinstance(e, (OSError, http.client.HTTPException)):
                    raise TransportError(f"kernelbox: {method} {path}: cannot reach {self.server}: {e}") from e
                raise
            if resp.will_close or not resp.isclosed():
                conn.close()
            else:
                self._give(conn)
            if resp.status >= 300:
                raise answer_error(resp.status, data)
            return resp.status, resp.headers, data
        raise AssertionError("unreachable")


def answer_error(status: int, raw: bytes) -> Exception:
    """Return the exception for an error answer with body raw."""
    raw = raw[:_MAX_ERROR_BODY]
    try:
        e = json.loads(raw)["error"]
        if e.get("code"):
            return error_for(status, e["code"], e.get("message", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return error_for(status, "http", raw.decode("utf-8", "replace").strip())
