"""The kernelbox client: sessions, calls, streaming, files and notebooks over HTTP.

Start at :class:`Client` and :meth:`Client.execute`; :meth:`Client.execute_stream`
yields output as it happens.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
from typing import IO, Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode

from ._transport import DEFAULT_SERVER, Transport, answer_error, token_for
from .errors import APIError, TransportError
from .stream import CALL_ID_HEADER, Stream
from .types import (CallInfo, DetachedCall, FileBatchResult, FileListing, Health, NotebookRun, Result,
                    SessionInfo, TemplateInfo, Artifact)

_JSON = {"Content-Type": "application/json"}


_PLAIN = re.compile(r"[A-Za-z0-9_.~-]+")


def _seg(s: str) -> str:
    """One URL path element: as it is when it needs no escaping (every session id), else quoted."""
    return s if _PLAIN.fullmatch(s) else quote(s, safe="")


def _file_path(session: str, path: str) -> str:
    """The URL path of a session file: each element escaped on its own."""
    return "/v1/sessions/" + _seg(session) + "/files/" + "/".join(_seg(p) for p in path.split("/"))


class Client:
    """A client of one kernelbox server. Safe for concurrent use from threads.

    ``server`` is an http(s) URL such as ``"http://127.0.0.1:8700"`` or
    ``"unix:/path/to/socket"``; it defaults to ``$KERNELBOX_SERVER``, else
    ``http://127.0.0.1:8700``, as the CLI does. ``token`` defaults to
    ``$KERNELBOX_TOKEN``, else to the token a ``kernelbox serve`` run by this user
    keeps for that URL in its 0600 runtime file (unix sockets need none: the server
    checks the peer's uid). ``timeout`` bounds each socket operation in seconds
    (None: no bound; an execute may run for minutes).

    Requests reuse a kept-alive connection (opened on first use, reopened when the
    server closed it); threads calling at once each get one, so a long execute in one
    thread does not hold up another's call; streams open their own.
    """

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None,
                 timeout: Optional[float] = None):
        server = server or os.environ.get("KERNELBOX_SERVER") or DEFAULT_SERVER
        if token is None:
            token = os.environ.get("KERNELBOX_TOKEN", "")
            if not token and not server.startswith("unix:"):
                token = token_for(server)
        self.server = server[:-1] if server.endswith("/") else server
        self._t = Transport(self.server, token, timeout)
        #: The id of the scoped token this client holds, when :meth:`scoped` made it.
        self.token_id: Optional[str] = None

    def close(self) -> None:
        """Close the kept connection."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def connections_opened(self) -> int:
        """How many connections this client has opened so far (streams included)."""
        return self._t.connections

    # -- plumbing

    def _json(self, method: str, path: str, body: Any = None) -> Any:
        raw = None if body is None else json.dumps(body).encode()
        _, _, data = self._t.request(method, path, raw, _JSON if raw is not None else None)
        return json.loads(data) if data else None

    # -- calls

    @staticmethod
    def _execute_body(code: str, inputs: Optional[Sequence[str]], template: Optional[str],
                      timeout: Optional[float], max_wait: Optional[float]) -> Dict[str, Any]:
        b: Dict[str, Any] = {"code": code}
        if inputs:
            b["inputs"] = list(inputs)
        if template:
            b["template"] = template
        if timeout:
            b["timeout_seconds"] = float(timeout)
        if max_wait:
            b["max_wait_seconds"] = float(max_wait)
        return b

    def execute(self, session_id: str, code: str, inputs: Optional[Sequence[str]] = None,
                template: Optional[str] = None, timeout: Optional[float] = None,
                max_wait: Optional[float] = None) -> Result:
        """Run code in session_id's kernel and return its Result.

        Cell errors, timeouts and kernel deaths are Results (see ``Result.status``);
        exceptions are for calls that could not run. ``inputs`` are host paths the
        server copies to the session's ``inputs/``; ``template`` names a new
        session's template; ``timeout`` bounds the run in seconds (server default
        when None); ``max_wait`` bounds the whole call including queueing.
        """
        body = self._execute_body(code, inputs, template, timeout, max_wait)
        return Result.from_json(self._json("POST", "/v1/sessions/" + _seg(session_id) + "/execute", body))

    def execute_stream(self, session_id: str, code: str, inputs: Optional[Sequence[str]] = None,
                       template: Optional[str] = None, timeout: Optional[float] = None,
                       max_wait: Optional[float] = None, max_fails: int = 10) -> Stream:
        """Run code like :meth:`execute` and return a :class:`Stream` of its events.

        Iterate it for events as they happen; ``stream.result`` holds the Result
        after the last one (or call ``stream.wait()``). A dropped connection is
        resumed by the call's id without losing or repeating events.
        """
        body = json.dumps(self._execute_body(code, inputs, template, timeout, max_wait)).encode()
        conn = self._t.new_connection(timeout=None)
        try:
            conn.request("POST", "/v1/sessions/" + _seg(session_id) + "/execute", body=body,
                         headers=self._t.headers({"Content-Type": "application/json", "Accept": "text/event-stream"}))
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise TransportError(f"kernelbox: execute: cannot reach {self.server}: {e}") from e
        if resp.status >= 300:
            data = resp.read(1 << 20)
            conn.close()
            raise answer_error(resp.status, data)
        return Stream(self._t, resp.getheader(CALL_ID_HEADER, ""), 0, max_fails, conn, resp)

    def start(self, session_id: str, code: str, inputs: Optional[Sequence[str]] = None,
              template: Optional[str] = None, timeout: Optional[float] = None,
              max_wait: Optional[float] = None) -> DetachedCall:
        """Register a call and return at once with its id (a detached execute).

        The call runs whether or not anyone follows it; follow it with
        :meth:`attach` or poll it with :meth:`call`.
        """
        body = self._execute_body(code, inputs, template, timeout, max_wait)
        body["detach"] = True
        d = self._json("POST", "/v1/sessions/" + _seg(session_id) + "/execute", body)
        return DetachedCall(d.get("call_id", ""), d.get("session_id", ""))

    def attach(self, call_id: str, after: int = 0, max_fails: int = 10) -> Stream:
        """Follow a call by id: a :class:`Stream` of its events after event ``after``.

        From the start (``after=0``) every event is replayed (a ``truncated`` event
        stands for those the server's log no longer holds); pass a
        ``StreamError.last_event_id`` to resume where a broken stream stopped.
        """
        return Stream(self._t, call_id, after, max_fails)

    def call(self, call_id: str) -> CallInfo:
        """Return a call's state, with its Result once done (CallExpired, NotFound)."""
        return CallInfo.from_json(self._json("GET", "/v1/calls/" + _seg(call_id)))

    def calls(self, session_id: str) -> List[CallInfo]:
        """List a session's recent calls, newest first, without their Results."""
        d = self._json("GET", "/v1/sessions/" + _seg(session_id) + "/calls")
        return [CallInfo.from_json(c) for c in d.get("calls") or []]

    def cancel(self, call_id: str) -> None:
        """Interrupt a call; a call that already ended raises CallFinished."""
        self._json("POST", "/v1/calls/" + _seg(call_id) + "/cancel", {})

    # -- sessions and templates

    def create_session(self, session_id: str, template: Optional[str] = None) -> SessionInfo:
        """Create a session with a template before its first call.

        A session that exists with that template is returned as it is; one with
        another template raises TemplateMismatch.
        """
        body: Dict[str, Any] = {"id": session_id}
        if template:
            body["template"] = template
        return SessionInfo.from_json(self._json("POST", "/v1/sessions", body))

    def sessions(self) -> List[SessionInfo]:
        """List the server's live sessions."""
        return [SessionInfo.from_json(s) for s in self._json("GET", "/v1/sessions").get("sessions") or []]

    def session(self, session_id: str) -> SessionInfo:
        """Return one session (NotFound when it does not exist)."""
        return SessionInfo.from_json(self._json("GET", "/v1/sessions/" + _seg(session_id)))

    def close_session(self, session_id: str) -> None:
        """Stop a session's kernel and delete its files (artifacts stay)."""
        self._json("DELETE", "/v1/sessions/" + _seg(session_id))

    def reset_session(self, session_id: str) -> None:
        """Give a session a fresh kernel, keeping its files."""
        self._json("POST", "/v1/sessions/" + _seg(session_id) + "/reset", {})

    def interrupt(self, session_id: str) -> None:
        """Interrupt a session's running call."""
        self._json("POST", "/v1/sessions/" + _seg(session_id) + "/interrupt", {})

    def hibernate(self, session_id: str) -> SessionInfo:
        """Save a session's namespace in its directory and stop its kernel (docs/durable.md).

        Its next call, or resume, restores the namespace in a new kernel. Raises
        CannotHibernate or SnapshotTooLarge when it cannot (the session then stays live).
        """
        return SessionInfo.from_json(self._json("POST", "/v1/sessions/" + _seg(session_id) + "/hibernate", {}))

    def resume(self, session_id: str) -> Dict[str, Any]:
        """Restore a hibernated session now; returns the server's answer (the session and
        its ``state_restored``: what came back, what did not and why)."""
        return self._json("POST", "/v1/sessions/" + _seg(session_id) + "/resume", {})

    def fork(self, session_id: str, new_id: str) -> Dict[str, Any]:
        """Make session new_id a copy of session_id as it is now (files and namespace);
        the original keeps running. Returns the server's answer for the new session."""
        return self._json("POST", "/v1/sessions/" + _seg(session_id) + "/fork", {"id": new_id})

    def templates(self) -> List[TemplateInfo]:
        """List the server's templates with their effective settings."""
        return [TemplateInfo.from_json(t) for t in self._json("GET", "/v1/templates").get("templates") or []]

    def artifacts(self, session_id: str) -> List[Artifact]:
        """List a session's artifacts."""
        d = self._json("GET", "/v1/sessions/" + _seg(session_id) + "/artifacts")
        return [Artifact.from_json(a) for a in d.get("artifacts") or []]

    def download_artifact(self, session_id: str, name: str) -> bytes:
        """Return one artifact's bytes (name relative to the session's artifacts, slash-separated)."""
        p = "/v1/artifacts/" + _seg(session_id) + "/" + "/".join(_seg(x) for x in name.split("/"))
        return self._t.request("GET", p)[2]

    def health(self) -> Health:
        """Return the server's health (status ``degraded`` with the problem on a 503)."""
        try:
            d = self._json("GET", "/healthz")
        except APIError as e:  # a 503 answer carries the problem
            if e.status == 503:
                return Health("degraded", "", 0, e.message)
            raise
        return Health(d.get("status", ""), d.get("backend", ""), d.get("sessions", 0), d.get("problem", ""))

    # -- session files

    def upload(self, session_id: str, path: str, data: Union[bytes, IO[bytes]],
               no_overwrite: bool = False) -> int:
        """Write data (bytes or a binary file) to path in the session directory; return its size.

        Parents are made; the file appears only once complete. Over the server's
        per-file limit raises TooLarge, over the session's quota QuotaExceeded,
        with ``no_overwrite`` an existing file FileExists. A file object streams
        (chunked) without being read into memory.
        """
        hdr = {"Content-Type": "application/octet-stream"}
        if no_overwrite:
            hdr["If-None-Match"] = "*"
        body: Any = data
        if not isinstance(data, (bytes, bytearray)):
            body = iter(lambda: data.read(256 << 10), b"")  # http.client sends it chunked
        _, _, raw = self._t.request("PUT", _file_path(session_id, path), body, hdr)
        return int(json.loads(raw).get("size", 0))

    def download(self, session_id: str, path: str) -> bytes:
        """Return the bytes of the session file at path.

        A directory raises IsDirectory, a link or device InvalidPath, a missing
        file or session NotFound.
        """
        return self._t.request("GET", _file_path(session_id, path))[2]

    def list_files(self, session_id: str, path: str = "", max: int = 0) -> FileListing:
        """List the directory at path ("" for the session directory), at most max entries."""
        q: Dict[str, Any] = {}
        if path:
            q["path"] = path
        if max > 0:
            q["max"] = max
        p = "/v1/sessions/" + _seg(session_id) + "/files" + ("?" + urlencode(q) if q else "")
        return FileListing.from_json(self._json("GET", p))

    def remove(self, session_id: str, path: str, recursive: bool = False) -> None:
        """Delete the session file at path; a directory only with recursive (else IsDirectory)."""
        p = _file_path(session_id, path) + ("?recursive=1" if recursive else "")
        self._json("DELETE", p)

    def batch(self, session_id: str, uploads: Iterable[Union[Tuple[str, bytes], Tuple[str, bytes, bool]]] = (),
              downloads: Iterable[str] = ()) -> FileBatchResult:
        """Upload and download several files in one request, each with its own result.

        ``uploads`` are ``(path, bytes)`` or ``(path, bytes, no_overwrite)``; they are
        written first, in order, then ``downloads`` are read. One bad file never
        fails the batch: its FileResult's ``status`` is the error code.
        """
        ups = []
        for u in uploads:
            item: Dict[str, Any] = {"path": u[0], "content": base64.b64encode(bytes(u[1])).decode()}
            if len(u) > 2 and u[2]:  # type: ignore[misc]
                item["no_overwrite"] = True
            ups.append(item)
        body = {"uploads": ups, "downloads": [{"path": p} for p in downloads]}
        return FileBatchResult.from_json(self._json("POST", "/v1/sessions/" + _seg(session_id) + "/files:batch", body))

    # -- scoped tokens (docs/security.md, "Scoped tokens")

    def create_token(self, name: str, sessions: Sequence[str], templates: Optional[Sequence[str]] = None,
                     ops: Optional[Sequence[str]] = None, max_sessions: int = 0, rate_per_minute: int = 0,
                     ttl_seconds: int = 0) -> Dict[str, Any]:
        """Mint a scoped token (admin token only) and return the server's answer:
        ``id``, ``name``, ``scope``, ... and ``token``, its secret, shown this once.

        ``sessions`` are ids, prefixes ending in ``*``, or ``"*"``; ``ops`` are among
        watch, execute, files, hibernate, fork, close (default all). A scoped token
        cannot mint tokens.
        """
        body: Dict[str, Any] = {"name": name, "sessions": list(sessions)}
        if templates:
            body["templates"] = list(templates)
        if ops:
            body["ops"] = list(ops)
        if max_sessions:
            body["max_sessions"] = int(max_sessions)
        if rate_per_minute:
            body["rate_per_minute"] = int(rate_per_minute)
        if ttl_seconds:
            body["ttl_seconds"] = int(ttl_seconds)
        return self._json("POST", "/v1/tokens", body)

    def tokens(self) -> List[Dict[str, Any]]:
        """List the scoped tokens, without their secrets (admin token only)."""
        return self._json("GET", "/v1/tokens").get("tokens") or []

    def revoke_token(self, token_id: str) -> None:
        """Revoke a scoped token at once: its calls, streams and WebSockets end."""
        self._json("DELETE", "/v1/tokens/" + _seg(token_id))

    def whoami(self) -> Dict[str, Any]:
        """Say which token this client holds: ``{"id", "name", "admin", "scope", ...}``."""
        return self._json("GET", "/v1/token")

    def scoped(self, session_id: str, name: Optional[str] = None, template: Optional[str] = None,
               ops: Optional[Sequence[str]] = None, ttl_seconds: int = 0,
               prefix: bool = False) -> "Client":
        """Create session ``session_id`` (with ``template``) and return a new Client that
        holds a scoped token for it alone (and, with ``prefix``, for ``session_id-*``):
        what a coordinator hands a sub-agent. The token's id is the new client's
        ``token_id``; revoke it with :meth:`revoke_token` when the agent is done.
        """
        self.create_session(session_id, template)
        sessions = [session_id] + ([session_id + "-*"] if prefix else [])
        t = self.create_token(name or ("agent-" + session_id), sessions,
                              templates=[template] if template else None, ops=ops, ttl_seconds=ttl_seconds)
        c = Client(self.server, t["token"], self._t.timeout)
        c.token_id = t["id"]
        return c

    # -- notebooks

    def run_notebook(self, notebook: Union[Dict[str, Any], str, bytes], parameters: Optional[Dict[str, Any]] = None,
                     inputs: Optional[Sequence[str]] = None, session_id: Optional[str] = None,
                     cell_timeout: Optional[float] = None, allow_errors: bool = False) -> NotebookRun:
        """Run a notebook (an nbformat dict or its JSON text) and return it executed.

        ``parameters`` are injected as a cell after the one tagged ``parameters``;
        ``session_id`` runs it in that session (else a fresh one the server closes).
        """
        nb = json.loads(notebook) if isinstance(notebook, (str, bytes)) else notebook
        body: Dict[str, Any] = {"notebook": nb}
        if parameters:
            body["parameters"] = parameters
        if inputs:
            body["inputs"] = list(inputs)
        if session_id:
            body["session_id"] = session_id
        if cell_timeout:
            body["cell_timeout_seconds"] = float(cell_timeout)
        if allow_errors:
            body["allow_errors"] = True
        return NotebookRun.from_json(self._json("POST", "/v1/notebooks/run", body))
