"""Typed forms of kernelbox's JSON answers (package api of the Go code).

Each class has ``from_json(dict)``; unknown fields are ignored, so a newer server
still works. Field names are the wire names.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class ErrorInfo:
    """Why a call did not end with status ok: the exception, or Timeout/KernelDied."""

    ename: str = ""
    evalue: str = ""
    traceback: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Optional[Dict[str, Any]]) -> Optional["ErrorInfo"]:
        """Return the ErrorInfo for d, or None when d is None."""
        if d is None:
            return None
        return cls(d.get("ename", ""), d.get("evalue", ""), list(d.get("traceback") or []))


@dataclass
class Artifact:
    """A file the code produced (under outputs/) or a saved rich output (display/)."""

    path: str = ""
    name: str = ""
    size: int = 0
    sha256: str = ""
    mime: str = ""
    partial: bool = False

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Artifact":
        """Return the Artifact d describes."""
        return cls(d.get("path", ""), d.get("name", ""), d.get("size", 0), d.get("sha256", ""),
                   d.get("mime", ""), bool(d.get("partial", False)))


@dataclass
class Result:
    """The outcome of one call.

    ``status`` is ``ok``, ``error``, ``timeout``, ``kernel_died`` or ``denied``;
    ``outputs`` are nbformat v4 output dicts; ``stdout``, ``stderr``, ``result`` and
    ``error`` are the same content in convenient form. ``state_lost`` says the
    session's variables are gone (its kernel was restarted).
    """

    session_id: str = ""
    status: str = ""
    execution_count: int = 0
    outputs: List[Dict[str, Any]] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    result: str = ""
    error: Optional[ErrorInfo] = None
    artifacts: List[Artifact] = field(default_factory=list)
    truncated: bool = False
    truncation_note: str = ""
    state_lost: bool = False
    notes: List[str] = field(default_factory=list)
    duration_ms: int = 0
    #: What a snapshot gave back before the code ran (after a hibernation, a fork, or a
    #: kernel death with the template's after-call checkpoints): ``from``
    #: ("hibernation", "fork:<id>", "checkpoint"), ``after_call`` (a checkpoint's),
    #: ``restored``, ``not_restored``, ``bytes``, ``took_ms``; None when nothing was.
    state_restored: Optional[Dict[str, Any]] = None

    @property
    def ok(self) -> bool:
        """True when the code ran to completion."""
        return self.status == "ok"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Result":
        """Return the Result d describes."""
        return cls(
            session_id=d.get("session_id", ""), status=d.get("status", ""),
            execution_count=d.get("execution_count", 0), outputs=d.get("outputs") or [],
            stdout=d.get("stdout", ""), stderr=d.get("stderr", ""), result=d.get("result", ""),
            error=ErrorInfo.from_json(d.get("error")),
            artifacts=[Artifact.from_json(a) for a in d.get("artifacts") or []],
            truncated=bool(d.get("truncated", False)), truncation_note=d.get("truncation_note", ""),
            state_lost=bool(d.get("state_lost", False)), notes=d.get("notes") or [],
            duration_ms=d.get("duration_ms", 0), state_restored=d.get("state_restored"),
        )


@dataclass
class Event:
    """One thing that happened during a streamed call, in order.

    ``type`` is ``status`` (``state``: queued, starting, running), ``stream`` (``name``
    stdout/stderr and ``text``), ``display``, ``update_display``, ``result``, ``error``
    (``output``: an nbformat output dict), ``clear_output`` (``wait``) or ``truncated``
    (``truncation``: events the server's log dropped before this reader got them).
    ``id`` is the event's sequence number in the call (0 when it has none).
    """

    type: str = ""
    state: str = ""
    name: str = ""
    text: str = ""
    output: Optional[Dict[str, Any]] = None
    wait: bool = False
    truncation: Optional[Dict[str, int]] = None
    id: int = 0

    @classmethod
    def from_json(cls, d: Dict[str, Any], seq: int = 0) -> "Event":
        """Return the Event d describes, numbered seq."""
        return cls(d.get("type", ""), d.get("state", ""), d.get("name", ""), d.get("text", ""),
                   d.get("output"), bool(d.get("wait", False)), d.get("truncation"), seq)


@dataclass
class SessionInfo:
    """A snapshot of one session (state: new, starting, idle, busy, dead)."""

    id: str = ""
    template: str = ""
    state: str = ""
    execution_count: int = 0
    calls: int = 0
    queued: int = 0
    kernel_id: str = ""
    created: str = ""
    last_activity: str = ""
    #: A hibernated session's snapshot (``bytes``, ``names``, ...), else None.
    snapshot: Optional[Dict[str, Any]] = None
    #: The last after-call checkpoint (``after_call``, ``bytes``, ``names``, ``taken``), else None.
    checkpoint: Optional[Dict[str, Any]] = None
    #: The session directory as its kernel sees it (absolute), once it has had a kernel; "" when unknown.
    dir: str = ""

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "SessionInfo":
        """Return the SessionInfo d describes."""
        return cls(d.get("id", ""), d.get("template", ""), d.get("state", ""), d.get("execution_count", 0),
                   d.get("calls", 0), d.get("queued", 0), d.get("kernel_id", ""), d.get("created", ""),
                   d.get("last_activity", ""), d.get("snapshot"), d.get("checkpoint"), d.get("dir", ""))


@dataclass
class TemplateInfo:
    """One template with its effective settings; ``raw`` holds every field sent."""

    name: str = ""
    description: str = ""
    kernel: str = ""
    image: str = ""
    warm: int = 0
    warm_ready: int = 0
    sessions: int = 0
    raw: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "TemplateInfo":
        """Return the TemplateInfo d describes."""
        return cls(d.get("name", ""), d.get("description", ""), d.get("kernel", ""), d.get("image", ""),
                   d.get("warm", 0), d.get("warm_ready", 0), d.get("sessions", 0), dict(d))


@dataclass
class FileEntry:
    """One entry of a directory listing (type: file, dir, symlink or other)."""

    name: str = ""
    type: str = ""
    size: int = 0
    mtime: str = ""


@dataclass
class FileListing:
    """A session directory listing; ``truncated`` when it holds more than were listed."""

    session_id: str = ""
    path: str = ""
    entries: List[FileEntry] = field(default_factory=list)
    truncated: bool = False

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileListing":
        """Return the FileListing d describes."""
        ents = [FileEntry(e.get("name", ""), e.get("type", ""), e.get("size", 0), e.get("mtime", ""))
                for e in d.get("entries") or []]
        return cls(d.get("session_id", ""), d.get("path", ""), ents, bool(d.get("truncated", False)))


@dataclass
class FileResult:
    """The outcome for one file of a batch: ``status`` is ``ok`` or an error code."""

    path: str = ""
    status: str = ""
    error: str = ""
    size: int = 0
    content: Optional[bytes] = None

    @property
    def ok(self) -> bool:
        """True when this file succeeded."""
        return self.status == "ok"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileResult":
        """Return the FileResult d describes (content decoded from base64)."""
        c = d.get("content")
        return cls(d.get("path", ""), d.get("status", ""), d.get("error", ""), d.get("size", 0),
                   base64.b64decode(c) if c is not None else None)


@dataclass
class FileBatchResult:
    """One result per upload and per download of a batch, in the order asked."""

    session_id: str = ""
    uploads: List[FileResult] = field(default_factory=list)
    downloads: List[FileResult] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "FileBatchResult":
        """Return the FileBatchResult d describes."""
        return cls(d.get("session_id", ""), [FileResult.from_json(r) for r in d.get("uploads") or []],
                   [FileResult.from_json(r) for r in d.get("downloads") or []])


@dataclass
class DetachedCall:
    """A registered call's id, the answer of a detached execute."""

    call_id: str = ""
    session_id: str = ""


@dataclass
class CallInfo:
    """A snapshot of one registered call (state: queued, running, done)."""

    call_id: str = ""
    session_id: str = ""
    code: str = ""
    state: str = ""
    status: str = ""
    error: Optional[Dict[str, str]] = None
    events: int = 0
    cancelled: bool = False
    duration_ms: int = 0
    result: Optional[Result] = None
    raw: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "CallInfo":
        """Return the CallInfo d describes."""
        r = d.get("result")
        return cls(d.get("call_id", ""), d.get("session_id", ""), d.get("code", ""), d.get("state", ""),
                   d.get("status", ""), d.get("error"), d.get("events", 0), bool(d.get("cancelled", False)),
                   d.get("duration_ms", 0), Result.from_json(r) if r else None, dict(d))


@dataclass
class Health:
    """The server's health: status ok or degraded (with the problem)."""

    status: str = ""
    backend: str = ""
    sessions: int = 0
    problem: str = ""


@dataclass
class NotebookRun:
    """The answer of a notebook run: the executed notebook (nbformat dict) and per-cell results."""

    notebook: Dict[str, Any] = field(default_factory=dict)
    status: str = ""
    failed_cell: Optional[int] = None
    error: Optional[ErrorInfo] = None
    session_id: str = ""
    cells: List[Dict[str, Any]] = field(default_factory=list)
    artifacts: List[Artifact] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "NotebookRun":
        """Return the NotebookRun d describes."""
        return cls(d.get("notebook") or {}, d.get("status", ""), d.get("failed_cell"),
                   ErrorInfo.from_json(d.get("error")), d.get("session_id", ""), list(d.get("cells") or []),
                   [Artifact.from_json(a) for a in d.get("artifacts") or []])
