"""The file tools of the Deep Agents backend: ls, read, write, edit, grep, glob, delete.

Their answers (fields, error codes and the wording of messages) are those of Deep
Agents' ``BaseSandbox`` (deepagents 0.7.8, ``deepagents/backends/sandbox.py``); the
deliberate differences are listed in docs/python.md. Listings, writes and deletes
under the session directory use kernelbox's files API; reads and edits run in the
session's kernel, so a page of a large file never crosses the wire whole; any other
path goes through the kernel. None raises: each returns its result type with
``error`` set.
"""

from __future__ import annotations

import asyncio
import fnmatch
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._paths import STAGING, Glob, PatternError, check_path, is_binary_name, iso, join
from ._types import (DeleteResult, EditResult, GlobResult, GrepResult, LsResult, ReadResult, WriteResult,
                     file_error)
from ..errors import APIError

#: Bounds of one grep or glob walk: entries listed, bytes searched, matches returned.
MAX_WALK_ENTRIES = 20_000
MAX_GREP_BYTES = 64 << 20
MAX_GLOB_MATCHES = 10_000

#: read's bounds, as BaseSandbox's: a binary file returned whole, a page of text, and
#: the largest file whose lines are counted when the page ends before its end.
MAX_BINARY_BYTES = 500 * 1024
MAX_OUTPUT_BYTES = 500 * 1024
MAX_LINE_COUNT_BYTES = 1024 * 1024

#: What read gives for an empty file, and appends to a page cut at MAX_OUTPUT_BYTES.
EMPTY_FILE = "System reminder: File exists but has empty contents"
TRUNCATION_MSG = ("\n\n[Output was truncated due to size limits. "
                  "This paginated read result exceeded the sandbox stdout limit. "
                  "Continue reading with a larger offset or smaller limit to inspect the rest of the file.]")

#: The files API's codes in the words BaseSandbox's ls and glob use.
_LIST_ERRORS = {"not_found": "path_not_found", "not_directory": "not_a_directory",
                "is_directory": "not_a_directory", "permission_denied": "permission_denied",
                "invalid_path": "invalid_path"}


def edit_error(code: str, file_path: str, old_string: str) -> str:
    """Return BaseSandbox's message for an edit that failed with code."""
    return {
        "file_not_found": f"Error: File '{file_path}' not found",
        "permission_denied": f"Error: Permission denied editing file '{file_path}'",
        "not_a_file": f"Error: '{file_path}' is not a regular file",
        "not_a_text_file": f"Error: File '{file_path}' is not a text file",
        "string_not_found": f"Error: String not found in file: '{old_string}'",
        "multiple_occurrences": (f"Error: String '{old_string}' appears multiple times. "
                                 "Use replace_all=True to replace all occurrences."),
    }.get(code, f"Error editing file '{file_path}': {code}")


def _grep_filter(glob: Optional[str]) -> Any:
    """grep's file filter: a glob without ``/`` matches base names at any depth (as
    ``grep --include``), one with ``/`` the path relative to the searched directory."""
    if not glob:
        return lambda rel: True
    if "/" not in glob:
        return lambda rel: fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], glob)
    return Glob(glob).match


class FilesMixin:
    """The file tools; the class using it provides client, session_id, root, _rel, _kernel and transfers."""

    client: Any
    session_id: str
    root: str
    _rel: Callable[[str], Optional[str]]
    _kernel: Callable[..., Any]
    upload_files: Callable[[List[Tuple[str, bytes]]], List[Any]]
    download_files: Callable[[List[str]], List[Any]]

    # -- helpers

    def _walk(self, base: str) -> Tuple[List[Tuple[str, str, int, Any]], bool, Optional[str]]:
        """List the tree under absolute base: (rel path, kind, size, mtime), truncated, error code."""
        rel = self._rel(base)
        if rel is None:
            a = self._kernel("walk", {"path": base, "max": MAX_WALK_ENTRIES})
            if a.get("error"):
                return [], False, a["error"]
            return [tuple(e) for e in a["entries"]], bool(a.get("truncated")), None  # type: ignore[misc]
        out: List[Tuple[str, str, int, Any]] = []
        todo = [""]
        while todo:
            d = todo.pop(0)
            try:
                lst = self.client.list_files(self.session_id, (rel + "/" + d).strip("/"))
            except APIError as e:
                if d == "":
                    return [], False, _LIST_ERRORS.get(e.code, e.code)
                continue
            for e in lst.entries:
                sub = (d + "/" + e.name).lstrip("/")
                if rel == "" and sub == STAGING:
                    continue
                out.append((sub, e.type, e.size, e.mtime))
                if e.type == "dir":
                    todo.append(sub)
                if len(out) >= MAX_WALK_ENTRIES:
                    return out, True, None
        return out, False, None

    def _default_base(self, path: Optional[str]) -> str:
        return (path or self.root).rstrip("/") or "/"

    # -- the tools

    def ls(self, path: str) -> LsResult:
        """List the directory at path: {path, is_dir, size, modified_at} with absolute paths."""
        if check_path(path):
            return LsResult(error=f"Path '{path}': invalid_path")
        base = path.rstrip("/") or "/"
        try:
            rel = self._rel(base)
            if rel is not None:
                lst = self.client.list_files(self.session_id, rel)
                ents = [(e.name, e.type, e.size, e.mtime) for e in lst.entries if not (rel == "" and e.name == STAGING)]
            else:
                a = self._kernel("ls", {"path": base})
                if a.get("error"):
                    return LsResult(error=f"Path '{path}': {a['error']}")
                ents = a["entries"]
        except APIError as e:
            return LsResult(error=f"Path '{path}': {_LIST_ERRORS.get(e.code, e.code)}")
        except Exception as e:
            return LsResult(error=f"Path '{path}': {e}")
        return LsResult(entries=[{"path": join(base, n), "is_dir": k == "dir", "size": s, "modified_at": iso(m)}
                                 for n, k, s, m in ents])

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Read lines offset..offset+limit (0-indexed) of a text file, or a binary file whole as base64.

        As BaseSandbox: line ends are not returned (lines are joined with ``\\n``), an
        empty file gives a reminder as its content, a page is cut at 500 KiB with a
        note, and a non-positive limit returns no lines (``no_lines_requested``).
        """
        if check_path(file_path):
            return ReadResult(error=f"File '{file_path}': invalid_path")
        try:
            args = {"path": file_path, "offset": max(int(offset), 0), "limit": max(int(limit), 0),
                    "binary": is_binary_name(file_path), "max_binary": MAX_BINARY_BYTES,
                    "max_out": MAX_OUTPUT_BYTES, "count_max": MAX_LINE_COUNT_BYTES,
                    "cut_note": TRUNCATION_MSG, "empty": EMPTY_FILE}
            a = self._kernel("read", args)
            if "error" in a:
                return ReadResult(error=f"File '{file_path}': {a['error']}")
            return ReadResult(file_data={"content": a["content"], "encoding": a.get("encoding", "utf-8")},
                              total_lines=a.get("total_lines"), start_line=a.get("start_line"),
                              end_line=a.get("end_line"), next_offset=a.get("next_offset"),
                              no_lines_requested=bool(a.get("no_lines_requested")))
        except Exception as e:
            return ReadResult(error=f"File '{file_path}': {e}")

    def write(self, file_path: str, content: str) -> WriteResult:
        """Write content to file_path, creating parents, replacing what was there."""
        r = self.upload_files([(file_path, content.encode("utf-8"))])[0]
        return WriteResult(error=f"Failed to write file '{file_path}': {r.error}") if r.error else WriteResult(path=file_path)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        """Replace old_string exactly (it must be unique unless replace_all); report the count.

        The file is edited where it lies (it never crosses the wire); an old_string
        with LF line ends also matches a file's CRLF ones, which new_string then gets.
        """
        if check_path(file_path):
            return EditResult(error=f"Error editing file '{file_path}': invalid_path")
        try:
            a = self._kernel("edit", {"path": file_path, "old": old_string, "new": new_string,
                                      "replace_all": bool(replace_all)})
        except Exception as e:
            return EditResult(error=f"Error editing file '{file_path}': {e}")
        if "error" in a:
            return EditResult(error=edit_error(a["error"], file_path, old_string))
        return EditResult(path=file_path, occurrences=a.get("count", 1))

    def grep(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None, *,
             max_count: Optional[int] = None) -> GrepResult:
        """Find lines holding the literal pattern in the files under path (default: the session directory).

        Match paths are the searched path joined with each file's path below it.
        """
        shown = path or "."
        try:
            base = self._default_base(path)
            if check_path(base):
                return GrepResult(error=f"Path '{shown}': invalid_path")
            keep = _grep_filter(glob)
            cap = max_count if max_count is not None else 10_000_000
            ents, truncated, err = self._walk(base)
            if err == "not_a_directory":  # a file given as path: search just it
                files = [base]
            elif err:
                return GrepResult(error=f"Path '{shown}': {err}")
            else:
                files = [join(base, p) for p, k, s, _ in ents if k == "file" and keep(p)]
            if self._rel(base) is None:
                a = self._kernel("grep", {"pattern": pattern, "files": files, "max": cap})
                m = [{"path": f, "line": i, "text": t} for f, i, t in a["matches"]]
                return GrepResult(matches=m, truncated=truncated or bool(a.get("truncated")))
            return self._grep_session(files, {join(base, p): s for p, _, s, _ in ents}, pattern, cap, truncated)
        except PatternError as e:
            return GrepResult(error=f"Path '{shown}': {e}")
        except Exception as e:
            return GrepResult(error=f"Path '{shown}': {e}")

    def _grep_session(self, files: List[str], sizes: Dict[str, int], pattern: str, cap: int,
                      truncated: bool) -> GrepResult:
        """grep files of the session directory, downloaded in batches up to MAX_GREP_BYTES in all."""
        chunk: List[str] = []
        size = 0
        for f in files:
            s = sizes.get(f, 0)
            if size + s > MAX_GREP_BYTES:
                truncated = True
                break
            chunk.append(f)
            size += s
        out: List[Dict[str, Any]] = []
        for i in range(0, len(chunk), 500):
            for r in self.download_files(chunk[i:i + 500]):
                try:
                    text = (r.content or b"").decode("utf-8")
                except UnicodeDecodeError:
                    continue  # a binary file: grep -I would skip it too
                for n, line in enumerate(text.splitlines(), 1):
                    if pattern in line:
                        if len(out) >= cap:
                            return GrepResult(matches=out, truncated=True)
                        out.append({"path": r.path, "line": n, "text": line})
        return GrepResult(matches=out, truncated=truncated)

    def glob(self, pattern: str, path: Optional[str] = None) -> GlobResult:
        """Find the regular files under path (default: the session directory) whose path
        relative to it matches pattern; matches are absolute paths, sorted."""
        shown = path or "/"
        try:
            base = self._default_base(path)
            if check_path(base):
                return GlobResult(error=f"Path '{shown}': invalid_path")
            g = Glob(pattern)
            ents, truncated, err = self._walk(base)
            if err:
                return GlobResult(error=f"Path '{shown}': {err}")
        except PatternError as e:
            return GlobResult(error=f"Path '{shown}': {e}")
        except Exception as e:
            return GlobResult(error=f"Path '{shown}': {e}")
        rels = sorted(p for p, k, _, _ in ents if k == "file" and g.match(p))
        if len(rels) > MAX_GLOB_MATCHES:
            rels, truncated = rels[:MAX_GLOB_MATCHES], True
        return GlobResult(matches=[{"path": join(base, p), "is_dir": False} for p in rels], truncated=truncated)

    def delete(self, file_path: str) -> DeleteResult:
        """Delete a file, or a directory with everything under it."""
        if check_path(file_path):
            return DeleteResult(error=f"Error deleting file '{file_path}': invalid_path")
        try:
            rel = self._rel(file_path)
            if rel == "":
                return DeleteResult(error=f"Error deleting file '{file_path}': permission_denied "
                                          "(the session directory itself cannot be deleted)")
            if rel is not None:
                self.client.remove(self.session_id, rel, recursive=True)
                return DeleteResult(path=file_path)
            a = self._kernel("delete", {"path": file_path})
        except APIError as e:
            if e.code in ("not_found", "not_directory"):
                return DeleteResult(error=f"Error: '{file_path}' not found")
            return DeleteResult(error=f"Error deleting file '{file_path}': {file_error(e.code)}")
        except Exception as e:
            return DeleteResult(error=f"Error deleting file '{file_path}': {e}")
        if a.get("error") == "not_found":
            return DeleteResult(error=f"Error: '{file_path}' not found")
        return DeleteResult(error=f"Error deleting file '{file_path}': {a['error']}") if a.get("error") \
            else DeleteResult(path=file_path)

    # -- the names of earlier deepagents releases (0.2-0.3), which its standard test suite still calls

    def ls_info(self, path: str) -> List[Dict[str, Any]]:
        """Earlier name of ls: the entries, or [] on error."""
        return self.ls(path).entries or []

    def glob_info(self, pattern: str, path: str = "/") -> List[Dict[str, Any]]:
        """Earlier form of glob: matches with paths relative to path, or [] on error."""
        base = self._default_base(path)
        prefix = "/" if base == "/" else base + "/"
        return [dict(m, path=m["path"][len(prefix):] if m["path"].startswith(prefix) else m["path"])
                for m in self.glob(pattern, base).matches or []]

    def grep_raw(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None) -> Any:
        """Earlier form of grep: the list of matches, or the error string."""
        r = self.grep(pattern, path, glob)
        return r.error if r.error else (r.matches or [])

    # -- async twins

    async def als(self, path: str) -> LsResult:
        """Async version of ls."""
        return await asyncio.to_thread(self.ls, path)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Async version of read."""
        return await asyncio.to_thread(self.read, file_path, offset, limit)

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        """Async version of write."""
        return await asyncio.to_thread(self.write, file_path, content)

    async def aedit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        """Async version of edit."""
        return await asyncio.to_thread(self.edit, file_path, old_string, new_string, replace_all)

    async def agrep(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None, *,
                    max_count: Optional[int] = None) -> GrepResult:
        """Async version of grep."""
        return await asyncio.to_thread(lambda: self.grep(pattern, path, glob, max_count=max_count))

    async def aglob(self, pattern: str, path: Optional[str] = None) -> GlobResult:
        """Async version of glob."""
        return await asyncio.to_thread(self.glob, pattern, path)

    async def adelete(self, file_path: str) -> DeleteResult:
        """Async version of delete."""
        return await asyncio.to_thread(self.delete, file_path)
