"""The result types of Deep Agents' backend protocol: deepagents' own when it is installed.

They follow ``deepagents/backends/protocol.py`` of deepagents 0.7 (the protocol with
``ReadResult`` windows, ``GrepResult.truncated`` and ``grep(max_count=)``), and the
provider types of its CLI (``deepagents_code/integrations/sandbox_provider.py``).
Without them, same-named dataclasses with the same fields (and ReadResult's checks)
stand in, so code written against deepagents works unchanged and this package needs
no dependency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

try:  # pragma: no cover - deepagents is not installable in this repository's CI
    from deepagents.backends.protocol import (  # type: ignore[import-not-found]
        DeleteResult, EditResult, ExecuteResponse, FileDownloadResponse, FileUploadResponse, GlobResult,
        GrepResult, LsResult, ReadResult, SandboxBackendProtocol, WriteResult)
    HAVE_DEEPAGENTS = True
except ImportError:
    HAVE_DEEPAGENTS = False

    class SandboxBackendProtocol:  # type: ignore[no-redef]
        """Stands in for deepagents' SandboxBackendProtocol base class."""

    @dataclass
    class ExecuteResponse:  # type: ignore[no-redef]
        """A shell command's combined output, exit code, and whether output was cut."""

        output: str
        exit_code: Optional[int] = None
        truncated: bool = False

    @dataclass
    class FileUploadResponse:  # type: ignore[no-redef]
        """One upload's outcome: error is None or file_not_found, permission_denied, is_directory, invalid_path."""

        path: str
        error: Optional[str] = None

    @dataclass
    class FileDownloadResponse:  # type: ignore[no-redef]
        """One download's outcome: content on success, else error."""

        path: str
        content: Optional[bytes] = None
        error: Optional[str] = None

    @dataclass
    class ReadResult:  # type: ignore[no-redef]
        """A window of a file's lines: file_data {content, encoding} and its line numbers."""

        error: Optional[str] = None
        file_data: Optional[Dict[str, Any]] = None
        total_lines: Optional[int] = None
        start_line: Optional[int] = None
        end_line: Optional[int] = None
        next_offset: Optional[int] = None
        no_lines_requested: bool = False

        def __post_init__(self) -> None:
            """Refuse the window combinations deepagents' own ReadResult refuses."""
            if (self.start_line is None) != (self.end_line is None):
                raise ValueError("ReadResult.start_line and end_line must be set together or both left unset")
            if self.no_lines_requested and (self.error is not None or self.start_line is not None
                                            or self.next_offset is not None or self.total_lines is not None):
                raise ValueError("ReadResult.no_lines_requested cannot be combined with error or pagination fields")
            if (self.next_offset is not None or self.total_lines is not None) and self.start_line is None:
                raise ValueError("ReadResult.next_offset and total_lines require start_line and end_line")
            if self.start_line is not None and self.end_line is not None:
                if self.start_line < 1 or self.end_line < self.start_line:
                    raise ValueError("ReadResult window must satisfy 1 <= start_line <= end_line")
                if self.total_lines is not None and self.total_lines < self.end_line:
                    raise ValueError("ReadResult.total_lines cannot be less than end_line")
                if self.next_offset is not None and self.next_offset != self.end_line:
                    raise ValueError("ReadResult.next_offset must equal end_line")

    @dataclass
    class WriteResult:  # type: ignore[no-redef]
        """A write's outcome: path on success, else error."""

        error: Optional[str] = None
        path: Optional[str] = None

    @dataclass
    class EditResult:  # type: ignore[no-redef]
        """An edit's outcome: path and occurrences replaced, else error."""

        error: Optional[str] = None
        path: Optional[str] = None
        occurrences: Optional[int] = None

    @dataclass
    class DeleteResult:  # type: ignore[no-redef]
        """A delete's outcome: path on success, else error."""

        error: Optional[str] = None
        path: Optional[str] = None

    @dataclass
    class LsResult:  # type: ignore[no-redef]
        """A listing: entries of FileInfo dicts (path, is_dir, size, modified_at), else error."""

        error: Optional[str] = None
        entries: Optional[List[Dict[str, Any]]] = None

    @dataclass
    class GrepResult:  # type: ignore[no-redef]
        """Matches {path, line, text}; truncated when the search stopped early."""

        error: Optional[str] = None
        matches: Optional[List[Dict[str, Any]]] = None
        truncated: bool = False

    @dataclass
    class GlobResult:  # type: ignore[no-redef]
        """Matching FileInfo dicts; truncated when the walk stopped early."""

        error: Optional[str] = None
        matches: Optional[List[Dict[str, Any]]] = None
        truncated: bool = False

try:  # pragma: no cover
    from deepagents_code.integrations.sandbox_provider import SandboxError  # type: ignore[import-not-found]
    from deepagents_code.integrations.sandbox_provider import SandboxNotFoundError  # type: ignore[import-not-found]
except ImportError:
    class SandboxError(Exception):  # type: ignore[no-redef]
        """Base error of sandbox provider operations (deepagents_code's, when installed)."""

    class SandboxNotFoundError(SandboxError):  # type: ignore[no-redef]
        """Raised when a sandbox_id is given but no such sandbox (kernelbox session) exists."""

try:  # pragma: no cover - deepagents-code (the CLI) is not installable here either
    from deepagents_code.integrations.sandbox_provider import (  # type: ignore[import-not-found]
        SandboxInstallHint, SandboxProvider, SandboxProviderMetadata)
except ImportError:
    @dataclass(frozen=True)
    class SandboxInstallHint:  # type: ignore[no-redef]
        """How to install a sandbox provider's package: kind "extra" or "package", and its name."""

        kind: str
        name: str

    @dataclass(frozen=True)
    class SandboxProviderMetadata:  # type: ignore[no-redef]
        """Static description of a sandbox provider, as Deep Agents' CLI registry reads it."""

        name: str
        working_dir: str
        install: Optional[SandboxInstallHint] = None
        supports_sandbox_id: bool = True
        supports_snapshot_name: bool = False
        backend_module: Optional[str] = None

    class SandboxProvider:  # type: ignore[no-redef]
        """Stands in for deepagents_code's SandboxProvider base class."""

FILE_NOT_FOUND = "file_not_found"
PERMISSION_DENIED = "permission_denied"
IS_DIRECTORY = "is_directory"
INVALID_PATH = "invalid_path"

#: kernelbox's per-file codes in Deep Agents' vocabulary; others pass through as they are.
FILE_ERRORS = {
    "ok": None,
    "not_found": FILE_NOT_FOUND,
    "not_directory": FILE_NOT_FOUND,
    "is_directory": IS_DIRECTORY,
    "invalid_path": INVALID_PATH,
    "permission_denied": PERMISSION_DENIED,
}


def file_error(code: str) -> Optional[str]:
    """Return Deep Agents' error for a kernelbox file status (quota, too_large, exists pass through)."""
    return FILE_ERRORS.get(code, code)

__all__ = ["DeleteResult", "EditResult", "ExecuteResponse", "FileDownloadResponse", "FileUploadResponse",
           "GlobResult", "GrepResult", "LsResult", "ReadResult", "SandboxBackendProtocol", "WriteResult",
           "SandboxError", "SandboxNotFoundError", "HAVE_DEEPAGENTS", "file_error", "SandboxInstallHint", "SandboxProvider",
           "SandboxProviderMetadata", "FILE_NOT_FOUND", "PERMISSION_DENIED", "IS_DIRECTORY", "INVALID_PATH"]
