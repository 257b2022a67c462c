"""The file tools of the Deep Agents backend: ls, read, write, edit, grep, glob, delete.

Under the session directory they use kernelbox's files API (listings, batch
downloads, uploads, deletes); elsewhere the session's kernel (``_da_kernel``).
None raises: each returns its result type with ``error`` set.
"""

from __future__ import annotations

import asyncio
import base64
import re
from typing import Any, Dict, List, Optional, Tuple

from ._da_types import (DeleteResult, EditResult, GlobResult, GrepResult, LsResult, ReadResult, WriteResult,
                        FILE_NOT_FOUND, file_error)
from .errors import APIError

#: Bounds of one grep or glob walk: entries listed, bytes searched.
MAX_WALK_ENTRIES = 20_000
MAX_GREP_BYTES = 64 << 20


def glob_regex(pattern: str) -> "re.Pattern[str]":
    """Compile a glob (``*``, ``**``, ``?``, ``[abc]``) matched against slash-separated relative paths."""
    i, out = 0, []
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("^" + "".join(out) + "$")


class FilesMixin:
    """The file tools; the class using it provides client, session_id, root, _rel, _kernel and transfers."""

    client: Any
    session_id: str

    # -- helpers

    def _info(self, path: str, is_dir: bool, size: int, mtime: Any) -> Dict[str, Any]:
        from .deepagents import iso
        return {"path": path, "is_dir": is_dir, "size": size, "modified_at": iso(mtime)}

    def _walk(self, base: str) -> Tuple[List[Tuple[str, bool, int, Any]], bool, Optional[str]]:
        """List the tree under absolute base: (rel path, is_dir, size, mtime), truncated, error."""
        from .deepagents import STAGING
        rel = self._rel(base)  # type: ignore[attr-defined]
        if rel is None:
            a = self._kernel("walk", {"path": base, "max": MAX_WALK_ENTRIES})  # type: ignore[attr-defined]
            if a.get("error"):
                return [], False, a["error"]
            return [tuple(e) for e in a["entries"]], bool(a.get("truncated")), None  # type: ignore[misc]
        out: List[Tuple[str, bool, int, Any]] = []
        todo = [""]
        while todo:
            d = todo.pop(0)
            try:
                lst = self.client.list_files(self.session_id, (rel + "/" + d).strip("/"))
            except APIError as e:
                if d == "":
                    return [], False, file_error(e.code)
                continue
            for e in lst.entries:
                sub = (d + "/" + e.name).lstrip("/")
                if rel == "" and sub == STAGING:
                    continue
                out.append((sub, e.type == "dir", e.size, e.mtime))
                if e.type == "dir":
                    todo.append(sub)
                if len(out) >= MAX_WALK_ENTRIES:
                    return out, True, None
        return out, False, None

    def _read_bytes(self, path: str) -> Tuple[Optional[bytes], Optional[str]]:
        r = self.download_files([path])[0]  # type: ignore[attr-defined]
        return r.content, r.error

    # -- the tools

    def ls(self, path: str) -> LsResult:
        """List the directory at path: FileInfo dicts with absolute paths."""
        from .deepagents import STAGING, check_path
        if check_path(path):
            return LsResult(error=f"invalid path: {path!r}")
        base = path.rstrip("/") or "/"
        rel = self._rel(base)  # type: ignore[attr-defined]
        try:
            if rel is not None:
                lst = self.client.list_files(self.session_id, rel)
                ents = [self._info(base.rstrip("/") + "/" + e.name, e.type == "dir", e.size, e.mtime)
                        for e in lst.entries if not (rel == "" and e.name == STAGING)]
                return LsResult(entries=ents)
            a = self._kernel("ls", {"path": base})  # type: ignore[attr-defined]
        except APIError as e:
            return LsResult(error=f"{file_error(e.code)}: {e.message}")
        except Exception as e:
            return LsResult(error=str(e))
        if a.get("error"):
            return LsResult(error=f"{a['error']}: {path}")
        return LsResult(entries=[self._info(base.rstrip("/") + "/" + n, d, s, m) for n, d, s, m in a["entries"]])

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        """Read lines offset..offset+limit (0-indexed) of a file; binary files come as base64."""
        if limit <= 0:
            return ReadResult(file_data={"content": "", "encoding": "utf-8"}, no_lines_requested=True)
        data, err = self._read_bytes(file_path)
        if err:
            return ReadResult(error=f"{err}: {file_path}")
        assert data is not None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return ReadResult(file_data={"content": base64.b64encode(data).decode(), "encoding": "base64"})
        lines = text.splitlines(keepends=True)
        offset = max(0, offset)
        if not lines:
            return ReadResult(file_data={"content": "", "encoding": "utf-8"})
        if offset >= len(lines):
            return ReadResult(error=f"Line offset {offset} exceeds file length ({len(lines)} lines)")
        win = lines[offset:offset + limit]
        end = offset + len(win)
        return ReadResult(file_data={"content": "".join(win), "encoding": "utf-8"}, total_lines=len(lines),
                          start_line=offset + 1, end_line=end, next_offset=end if end < len(lines) else None)

    def write(self, file_path: str, content: str) -> WriteResult:
        """Write content to file_path, creating parents, replacing what was there."""
        r = self.upload_files([(file_path, content.encode("utf-8"))])[0]  # type: ignore[attr-defined]
        return WriteResult(error=f"{r.error}: {file_path}") if r.error else WriteResult(path=file_path)

    def edit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        """Replace old_string exactly (it must be unique unless replace_all); report the count."""
        data, err = self._read_bytes(file_path)
        if err:
            return EditResult(error=f"{err}: {file_path}")
        assert data is not None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return EditResult(error=f"not a UTF-8 text file: {file_path}")
        n = text.count(old_string) if old_string else 0
        if n == 0:
            return EditResult(error=f"String not found in file: {old_string!r}")
        if n > 1 and not replace_all:
            return EditResult(error=f"String {old_string!r} appears {n} times in {file_path}; "
                                    "give more context to make it unique, or set replace_all")
        new = text.replace(old_string, new_string) if replace_all else text.replace(old_string, new_string, 1)
        w = self.write(file_path, new)
        return EditResult(error=w.error) if w.error else EditResult(path=file_path, occurrences=n if replace_all else 1)

    def grep(self, pattern: str, path: Optional[str] = None, glob: Optional[str] = None, *,
             max_count: Optional[int] = None) -> GrepResult:
        """Find lines holding the literal pattern in the files under path (default: the session directory)."""
        base = (path or self.root).rstrip("/") or "/"  # type: ignore[attr-defined]
        from .deepagents import check_path
        if check_path(base):
            return GrepResult(error=f"invalid path: {base!r}")
        cap = max_count if max_count is not None else 10_000_000
        ents, truncated, err = self._walk(base)
        if err:
            if err == FILE_NOT_FOUND or self._rel(base) is not None:  # type: ignore[attr-defined]
                # a file given as path: search just it
                r, e2 = self._read_bytes(base)
                if e2:
                    return GrepResult(error=f"{err}: {base}")
                return self._grep_text([(base, r or b"")], pattern, cap)
            return GrepResult(error=f"{err}: {base}")
        rx = glob_regex(glob) if glob else None
        files = [(base + "/" + p, s) for p, d, s, _ in ents
                 if not d and (rx is None or rx.match(p) or rx.match(p.rsplit("/", 1)[-1]))]
        if self._rel(base) is None:  # type: ignore[attr-defined]
            a = self._kernel("grep", {"pattern": pattern, "files": [f for f, _ in files], "max": cap})  # type: ignore[attr-defined]
            m = [{"path": f, "line": i, "text": t} for f, i, t in a["matches"]]
            return GrepResult(matches=m, truncated=truncated or bool(a.get("truncated")))
        got: List[Tuple[str, bytes]] = []
        chunk: List[str] = []
        size = 0
        for f, s in files:
            if size + s > MAX_GREP_BYTES:
                truncated = True
                break
            chunk.append(f)
            size += s
        for i in range(0, len(chunk), 500):
            for r in self.download_files(chunk[i:i + 500]):  # type: ignore[attr-defined]
                if r.content is not None:
                    got.append((r.path, r.content))
        res = self._grep_text(got, pattern, cap)
        res.truncated = res.truncated or truncated
        return res

    @staticmethod
    def _grep_text(files: List[Tuple[str, bytes]], pattern: str, cap: int) -> GrepResult:
        out: List[Dict[str, Any]] = []
        for f, data in files:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            for i, line in enumerate(text.splitlines(), 1):
                if pattern in line:
                    if len(out) >= cap:
                        return GrepResult(matches=out, truncated=True)
                    out.append({"path": f, "line": i, "text": line})
        return GrepResult(matches=out)

    def glob(self, pattern: str, path: Optional[str] = None) -> GlobResult:
        """Find files whose path relative to path (default: the session directory) matches pattern."""
        base = (path or self.root).rstrip("/") or "/"  # type: ignore[attr-defined]
        from .deepagents import check_path
        if check_path(base):
            return GlobResult(error=f"invalid path: {base!r}")
        ents, truncated, err = self._walk(base)
        if err:
            return GlobResult(error=f"{err}: {base}")
        rx = glob_regex(pattern.lstrip("/"))
        m = [self._info(base.rstrip("/") + "/" + p, d, s, t) for p, d, s, t in ents if rx.match(p)]
        return GlobResult(matches=m, truncated=truncated)

    def delete(self, file_path: str) -> DeleteResult:
        """Delete a file, or a directory with everything under it."""
        from .deepagents import check_path
        if check_path(file_path):
            return DeleteResult(error=f"invalid path: {file_path!r}")
        rel = self._rel(file_path)  # type: ignore[attr-defined]
        try:
            if rel == "":
                return DeleteResult(error="permission_denied: the session directory itself cannot be deleted")
            if rel is not None:
                self.client.remove(self.session_id, rel, recursive=True)
                return DeleteResult(path=file_path)
            a = self._kernel("delete", {"path": file_path})  # type: ignore[attr-defined]
        except APIError as e:
            return DeleteResult(error=f"{file_error(e.code)}: {file_path}")
        except Exception as e:
            return DeleteResult(error=str(e))
        return DeleteResult(error=f"{a['error']}: {file_path}") if a.get("error") else DeleteResult(path=file_path)

    # -- the names of earlier deepagents releases (0.2-0.3), which its standard test suite still calls

    def ls_info(self, path: str) -> List[Dict[str, Any]]:
        """Earlier name of ls: the entries, or [] on error."""
        return self.ls(path).entries or []

    def glob_info(self, pattern: str, path: str = "/") -> List[Dict[str, Any]]:
        """Earlier form of glob: matches with paths relative to path, or [] on error."""
        base = (path or self.root).rstrip("/") or "/"  # type: ignore[attr-defined]
        prefix = "/" if base == "/" else base + "/"
        out = []
        for m in self.glob(pattern, base).matches or []:
            out.append(dict(m, path=m["path"][len(prefix):] if m["path"].startswith(prefix) else m["path"]))
        return out

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
