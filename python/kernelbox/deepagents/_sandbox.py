"""KernelboxSandbox: one kernelbox session as a Deep Agents sandbox (execute, transfers,
the file tools of :mod:`._files`, run_python).

Paths under the session directory (as the server names it) go through kernelbox's
files API; any other absolute path through the session's kernel (:mod:`._kernel`).
"""

from __future__ import annotations

import asyncio
import base64
import posixpath
import secrets
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import _kernel
from ._files import FilesMixin
from ._paths import STAGING, check_path
from ._types import ExecuteResponse, FileDownloadResponse, FileUploadResponse, SandboxBackendProtocol, file_error
from ..client import Client
from ..errors import NotFound
from ..types import Result


#: Without a session directory to stage through (remote, swarm), file bytes travel in the
#: cells themselves: this many a call, and at most MAX_INLINE_FILE bytes downloaded.
INLINE_CHUNK = 160 << 10
MAX_INLINE_FILE = 256 << 20


class KernelboxSandbox(FilesMixin, SandboxBackendProtocol):  # type: ignore[misc]
    """A Deep Agents sandbox backed by one kernelbox session.

    ``url`` and ``token`` default as :class:`kernelbox.Client`'s do
    (``$KERNELBOX_SERVER``, ``$KERNELBOX_TOKEN`` or the runtime file);
    ``session_id`` defaults to a new random id (the session is created at once,
    with ``template``). ``max_output_bytes`` bounds a command's output (its middle
    is dropped, with a note, and ``truncated`` set); ``default_timeout`` is the
    command timeout in seconds when ``execute`` gets none (0: none).
    Safe for concurrent use; calls on one session run one at a time, in order.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, session_id: Optional[str] = None,
                 template: Optional[str] = None, *, client: Optional[Client] = None,
                 max_output_bytes: int = 100_000, default_timeout: float = 1800):
        self.client = client or Client(url, token)
        self.session_id = session_id or "da-" + secrets.token_hex(8)
        self.template = template
        self.max_output_bytes = max_output_bytes
        self.default_timeout = default_timeout
        self._root: Optional[str] = None
        self._no_root = ""  # why the server names no session directory, once it said so
        self.client.create_session(self.session_id, template)

    @property
    def id(self) -> str:
        """The sandbox's id: its kernelbox session id."""
        return self.session_id

    # -- the kernel

    def _kernel(self, op: str, args: Dict[str, Any], timeout: Optional[float] = None) -> Any:
        """Run one operation of _kernel in the session's kernel and return its answer.

        Arguments over MAX_INLINE_ARGS (a 1 MB grep pattern, a large edit) travel in a
        file of the session directory's staging folder, which the kernel removes.
        """
        r = self.client.execute(self.session_id, self._cell(op, args), template=self.template, timeout=timeout)
        if r.status != "ok":
            why = r.error.ename + ": " + r.error.evalue if r.error else r.status
            raise RuntimeError(f"kernelbox: {op} in session {self.session_id}: {r.status}: {why}")
        return _kernel.parse(r.stdout)

    def _cell(self, op: str, args: Dict[str, Any]) -> str:
        a = _kernel.encode(args)
        if len(a) <= _kernel.MAX_INLINE_ARGS:
            return _kernel.program(op, a)
        name = STAGING + "/args-" + secrets.token_hex(8)
        self.client.upload(self.session_id, name, a.encode())
        return _kernel.program(op, a, self.root + "/" + name)

    @property
    def root(self) -> str:
        """The session directory's absolute path as the sandbox sees it, as the server names it.

        It comes from the session's ``dir`` (GET /v1/sessions/{id}), never from the
        kernel's current directory, which code in the sandbox may change. A session
        that has not had a kernel yet is started first. Raises RuntimeError on a
        backend whose kernels keep the session's files elsewhere (remote, swarm):
        give those absolute paths, which all go through the kernel.
        """
        if self._no_root:
            raise RuntimeError(self._no_root)
        if self._root is None:
            info = self.client.session(self.session_id)
            if not info.dir:
                r = self.client.execute(self.session_id, "pass", template=self.template)
                if r.status != "ok":
                    raise RuntimeError(f"kernelbox: start session {self.session_id}: {_call_failure(r)}")
                info = self.client.session(self.session_id)
            if not info.dir:
                self._no_root = (f"kernelbox: the server names no directory for session {self.session_id} "
                                 "(its backend keeps the session's files in the kernel); give absolute paths")
                raise RuntimeError(self._no_root)
            self._root = info.dir.rstrip("/") or "/"
        return self._root

    def _rel(self, path: str) -> Optional[str]:
        """Return path relative to the session directory ("" for it), or None when outside it
        (or when the server names no session directory: then every path goes through the kernel)."""
        try:
            root = self.root
        except RuntimeError:
            return None
        p = posixpath.normpath(path) if path != "/" else "/"
        if p == root:
            return ""
        if p.startswith(root + "/"):
            return p[len(root) + 1:]
        return None

    def execute(self, command: str, *, timeout: Optional[int] = None) -> ExecuteResponse:
        """Run command with /bin/sh -c in the sandbox; return its output and exit code.

        The command runs as a child of the session's kernel, in the session directory
        (whatever the kernel's current directory), in a process group of its own. Past
        ``timeout`` seconds the group is killed, the exit code is 124 and the output says
        so. Output past ``max_output_bytes`` loses its middle (a note says how much) and
        ``truncated`` is set.
        """
        t = self.default_timeout if timeout is None else timeout
        try:
            cwd: Optional[str] = self.root
        except RuntimeError:
            cwd = None
        args = {"cmd": command, "limit": self.max_output_bytes, "timeout": t, "cwd": cwd}
        # The call's own bound leaves the kernel time to kill the group and answer.
        try:
            cell = self._cell("sh", args)
        except Exception as e:
            return ExecuteResponse(output=f"[kernelbox: the command could not be sent: {e}]", exit_code=None)
        r = self.client.execute(self.session_id, cell, template=self.template, timeout=(t + 60) if t else 0)
        if r.status != "ok":
            return ExecuteResponse(output=_call_failure(r), exit_code=None, truncated=r.truncated)
        a = _kernel.parse(r.stdout)
        out = a["output"]
        if a.get("timed_out"):
            out += f"\n[kernelbox: command timed out after {t} s; its process group was killed (exit code 124)]"
        return ExecuteResponse(output=out, exit_code=a["exit_code"], truncated=bool(a["truncated"]))

    async def aexecute(self, command: str, *, timeout: Optional[int] = None) -> ExecuteResponse:
        """Async version of execute."""
        return await asyncio.to_thread(self.execute, command, timeout=timeout)

    def run_python(self, code: str, inputs: Sequence[str] = ()) -> Result:
        """Run Python in the session's stateful kernel (variables persist) and return the Result."""
        return self.client.execute(self.session_id, code, inputs=list(inputs), template=self.template)

    async def arun_python(self, code: str, inputs: Sequence[str] = ()) -> Result:
        """Async version of run_python."""
        return await asyncio.to_thread(self.run_python, code, inputs)

    # -- file transfer

    def upload_files(self, files: List[Tuple[str, bytes]]) -> List[FileUploadResponse]:
        """Write each (path, content); one response per file, in input order, never raising."""
        out: List[Optional[FileUploadResponse]] = [None] * len(files)
        inside: List[Tuple[int, str, bytes]] = []
        outside: List[Tuple[int, str, bytes]] = []
        for i, (path, content) in enumerate(files):
            bad = check_path(path)
            if bad:
                out[i] = FileUploadResponse(path=path, error=bad)
                continue
            rel = self._rel(path)
            if rel == "":
                out[i] = FileUploadResponse(path=path, error="is_directory")
                continue
            (inside if rel is not None else outside).append((i, rel if rel is not None else path, content))
        try:
            if outside and self._rootless():
                for i, p, c in outside:
                    out[i] = FileUploadResponse(path=p, error=self._put_inline(p, c))
                outside = []
            for group, direct in ((inside, True), (outside, False)):
                if not group:
                    continue
                stage = STAGING + "/" + secrets.token_hex(6)
                names = [rel if direct else f"{stage}/{k}" for k, (_, rel, _) in enumerate(group)]
                res = self.client.batch(self.session_id, [(n, c) for n, (_, _, c) in zip(names, group)])
                errs = [file_error(r.status) for r in res.uploads]
                if not direct:
                    ok = [(self.root + "/" + n, p) for n, (_, p, _), e in zip(names, group, errs) if e is None]
                    moved = iter(self._kernel("put", {"files": ok}) if ok else [])
                    errs = [e if e is not None else next(moved) for e in errs]
                    self._drop(stage)
                for (i, _, _), e in zip(group, errs):
                    out[i] = FileUploadResponse(path=files[i][0], error=e)
        except Exception as e:  # the whole request failed: every unanswered file says why
            for i, r in enumerate(out):
                if r is None:
                    out[i] = FileUploadResponse(path=files[i][0], error=_whole(e))
        return [r for r in out if r is not None]

    def _rootless(self) -> bool:
        """Report whether the server names no session directory (nothing can be staged)."""
        try:
            self.root
        except RuntimeError:
            return True
        return False

    def _put_inline(self, path: str, content: bytes) -> Optional[str]:
        """Write content to path through the kernel, INLINE_CHUNK bytes a call."""
        for k in range(0, max(len(content), 1), INLINE_CHUNK):
            part = base64.b64encode(content[k:k + INLINE_CHUNK]).decode("ascii")
            a = self._kernel("putb", {"path": path, "data": part, "append": k > 0})
            if a.get("error"):
                return a["error"]
        return None

    def _get_inline(self, path: str, limit: int) -> Tuple[Optional[bytes], Optional[str]]:
        """Read path through the kernel, INLINE_CHUNK bytes a call, at most limit bytes."""
        buf = bytearray()
        while True:
            a = self._kernel("getb", {"path": path, "offset": len(buf), "size": INLINE_CHUNK})
            if a.get("error"):
                return None, a["error"]
            buf += base64.b64decode(a["data"])
            if a["eof"]:
                return bytes(buf), None
            if len(buf) > limit:
                return None, "too_large"

    def download_files(self, paths: List[str]) -> List[FileDownloadResponse]:
        """Read each path; one response per path, in input order, never raising."""
        out: List[Optional[FileDownloadResponse]] = [None] * len(paths)
        inside: List[Tuple[int, str]] = []
        outside: List[Tuple[int, str]] = []
        for i, path in enumerate(paths):
            bad = check_path(path)
            if bad:
                out[i] = FileDownloadResponse(path=path, error=bad)
                continue
            rel = self._rel(path)
            if rel == "":
                out[i] = FileDownloadResponse(path=path, error="is_directory")
            elif rel is not None:
                inside.append((i, rel))
            else:
                outside.append((i, path))
        try:
            if inside:
                res = self.client.batch(self.session_id, downloads=[r for _, r in inside])
                for (i, _), r in zip(inside, res.downloads):
                    e = file_error(r.status)
                    out[i] = FileDownloadResponse(path=paths[i], content=(r.content or b"") if e is None else None, error=e)
            if outside and self._rootless():
                for i, p in outside:
                    c, e = self._get_inline(p, MAX_INLINE_FILE)
                    out[i] = FileDownloadResponse(path=p, content=c, error=e)
                outside = []
            if outside:
                stage = STAGING + "/" + secrets.token_hex(6)
                names = [f"{stage}/{k}" for k in range(len(outside))]
                errs = self._kernel("get", {"files": [[p, self.root + "/" + n] for (_, p), n in zip(outside, names)]})
                got = [n for n, e in zip(names, errs) if e is None]
                res = self.client.batch(self.session_id, downloads=got) if got else None
                it = iter(res.downloads if res else [])
                for (i, _), e in zip(outside, errs):
                    if e is None:
                        r = next(it)
                        e = file_error(r.status)
                        out[i] = FileDownloadResponse(path=paths[i], content=(r.content or b"") if e is None else None, error=e)
                    else:
                        out[i] = FileDownloadResponse(path=paths[i], error=e)
                self._drop(stage)
        except Exception as e:
            for i, r in enumerate(out):
                if r is None:
                    out[i] = FileDownloadResponse(path=paths[i], error=_whole(e))
        return [r for r in out if r is not None]

    async def aupload_files(self, files: List[Tuple[str, bytes]]) -> List[FileUploadResponse]:
        """Async version of upload_files."""
        return await asyncio.to_thread(self.upload_files, files)

    async def adownload_files(self, paths: List[str]) -> List[FileDownloadResponse]:
        """Async version of download_files."""
        return await asyncio.to_thread(self.download_files, paths)

    def _drop(self, stage: str) -> None:
        """Remove a staging directory (best effort: it holds only copies)."""
        try:
            self.client.remove(self.session_id, stage, recursive=True)
        except Exception:
            pass

    def close(self) -> None:
        """Close the session: its kernel stops and its files are deleted."""
        try:
            self.client.close_session(self.session_id)
        except NotFound:
            pass


def _call_failure(r: Result) -> str:
    """Describe a kernel call that did not end ok, for an agent."""
    why = f"{r.error.ename}: {r.error.evalue}" if r.error else r.status
    note = " (the kernel was restarted; its variables are gone)" if r.state_lost else ""
    return f"[kernelbox: the command could not finish: {r.status}: {why}{note}]"


def _whole(e: Exception) -> str:
    """The per-file error for a request that failed as a whole."""
    code = getattr(e, "code", "")
    return file_error(code) if code in ("permission_denied", "invalid_path", "not_found") else f"error: {e}"


__all__ = ["KernelboxSandbox"]
