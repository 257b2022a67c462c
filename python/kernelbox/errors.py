"""Errors of the kernelbox client: one table from the server's error codes to classes.

Every error answer of ``kernelbox serve`` is ``{"error": {"code", "message"}}`` with an
HTTP status. :data:`ERRORS` is the one table mapping each code to its status and to the
exception class raised for it; it mirrors ``api/errors.go`` (the Go sentinels and their
codes and statuses) plus the codes that have no Go sentinel (``unauthorized``,
``forbidden_host``, ``cross_origin``, ``internal``, ``too_many_connections``).
``tests/test_errors.py`` reads ``api/errors.go`` and fails when the two tables disagree.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple, Type


class KernelboxError(Exception):
    """Base class of every error this package raises."""


class TransportError(KernelboxError, ConnectionError):
    """The server could not be reached, or the connection broke before an answer."""


class StreamError(TransportError):
    """An event stream ended before the call's result and could not be resumed.

    ``call_id`` names the call (follow it again with :meth:`Client.attach`) and
    ``last_event_id`` is the last event delivered, so nothing is delivered twice.
    """

    def __init__(self, message: str, call_id: str = "", last_event_id: int = 0):
        super().__init__(message)
        self.call_id = call_id
        self.last_event_id = last_event_id


class APIError(KernelboxError):
    """An error answer from the server.

    Attributes: ``status`` (the HTTP status), ``code`` (the server's machine-readable
    code, e.g. ``"not_found"``), ``message`` (the server's text) and ``result`` (the
    call's Result when a streamed call failed after it had one, else None).
    """

    def __init__(self, status: int, code: str, message: str, result: object = None):
        super().__init__(f"kernelbox: {code} ({status}): {message}")
        self.status = status
        self.code = code
        self.message = message
        self.result = result


class InvalidRequest(APIError):
    """The request is malformed (session id, empty code, bad inputs). Nothing ran."""


class Unauthorized(APIError):
    """The bearer token is missing or wrong."""


class PermissionDenied(APIError):
    """The permission policy refused the call or one of its inputs."""


class NotFound(APIError):
    """The session, call, artifact or file does not exist."""


class Disabled(APIError):
    """The server has no backend that can run code."""


class TooManySessions(APIError):
    """Starting another session would pass the server's limit (429)."""


class QueueFull(APIError):
    """The session already has as many calls waiting as it may (429)."""


class SessionClosed(APIError):
    """The session was closed or reset while the call waited."""


class ShuttingDown(APIError):
    """The server is shutting down (503)."""


class BackendError(APIError):
    """The backend could not provide a kernel (502); the call did not run."""


class Canceled(APIError):
    """The request was cancelled (the client went away)."""


class CrossOrigin(APIError):
    """A browser request from another site that changes state was refused."""


class InternalError(APIError):
    """The server failed in a way it did not classify (500)."""


class CallExpired(APIError):
    """The call existed but the server's retention dropped it (410)."""


class CallLost(APIError):
    """The call ran in a kernelbox process that ended (SIGKILL, a crash, a stop): its
    answer is gone (410). The restarted server says so instead of "not found"."""


class CallFinished(APIError):
    """The call already ended, so it cannot be cancelled."""


class ForbiddenHost(APIError):
    """The Host header is not one the listener accepts (DNS rebinding guard)."""


class TooLarge(APIError):
    """The request or file is over one of the server's size limits (413)."""


class TooManyNotebookRuns(APIError):
    """The server already runs as many notebooks as it may (429); retry later."""


class InvalidPath(APIError):
    """A session file path is absolute, has ``.``/``..``, NUL, or leads through a link."""


class IsDirectory(APIError):
    """A session file path names a directory where a file was expected."""


class NotDirectory(APIError):
    """A session file path has a file where a directory was expected."""


class QuotaExceeded(APIError):
    """The session's disk quota is full (507); the upload left no partial file."""


class FileExists(APIError):
    """An upload that must not overwrite found a file there (412)."""


class TemplateMismatch(APIError):
    """The call named a template other than its session's (409)."""


class TooManyConnections(APIError):
    """The server is at its connection cap (503); retry later."""


class CannotHibernate(APIError):
    """The session cannot hibernate (an R kernel, or a backend whose files live in the kernel) (409)."""


class SnapshotTooLarge(APIError):
    """The session's namespace (or a fork's files) is over its snapshot limit; it stays live (507)."""


class CannotResume(APIError):
    """The snapshot could not be loaded (the kernel died, e.g. out of memory); it is kept, the session stays hibernated (409)."""


class RateLimited(APIError):
    """A scoped token made more calls than its rate_per_minute (429); retry after Retry-After."""


class TooManyTokens(APIError):
    """The server keeps as many scoped tokens as it may (429); revoke some."""


#: The one table: error code -> (HTTP status, exception class). Mirrors api/errors.go.
ERRORS: Dict[str, Tuple[int, Type[APIError]]] = {
    "invalid_request": (400, InvalidRequest),
    "unauthorized": (401, Unauthorized),
    "permission_denied": (403, PermissionDenied),
    "not_found": (404, NotFound),
    "disabled": (503, Disabled),
    "too_many_sessions": (429, TooManySessions),
    "queue_full": (429, QueueFull),
    "session_closed": (409, SessionClosed),
    "shutting_down": (503, ShuttingDown),
    "backend_error": (502, BackendError),
    "canceled": (499, Canceled),
    "cross_origin": (403, CrossOrigin),
    "internal": (500, InternalError),
    "call_expired": (410, CallExpired),
    "call_lost": (410, CallLost),
    "call_finished": (409, CallFinished),
    "forbidden_host": (403, ForbiddenHost),
    "too_large": (413, TooLarge),
    "too_many_notebook_runs": (429, TooManyNotebookRuns),
    "invalid_path": (400, InvalidPath),
    "is_directory": (409, IsDirectory),
    "not_directory": (409, NotDirectory),
    "quota": (507, QuotaExceeded),
    "exists": (412, FileExists),
    "template_mismatch": (409, TemplateMismatch),
    "too_many_connections": (503, TooManyConnections),
    "cannot_hibernate": (409, CannotHibernate),
    "snapshot_too_large": (507, SnapshotTooLarge),
    "cannot_resume": (409, CannotResume),
    "rate_limited": (429, RateLimited),
    "too_many_tokens": (429, TooManyTokens),
}


def error_for(status: int, code: str, message: str, result: Optional[object] = None) -> APIError:
    """Return the exception for an error answer: the table's class for code, else APIError."""
    row = ERRORS.get(code)
    cls = row[1] if row else APIError
    return cls(status, code, message, result)


#: What ``from kernelbox.errors import *`` (and so ``kernelbox``) exports: the base
#: classes, the table and every class of its rows, nothing of the typing machinery.
__all__ = ["KernelboxError", "TransportError", "StreamError", "APIError", "ERRORS", "error_for"] + sorted(
    {cls.__name__ for _, cls in ERRORS.values()} - {"APIError"})
