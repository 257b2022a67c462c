"""Paths and patterns of the Deep Agents backend: the checks every tool applies first,
the glob contract of Deep Agents' ``BaseSandbox``, and the file kinds ``read`` returns
whole (base64) instead of as lines.

A leaf module: it imports nothing else of the backend, so every other module may
import it.
"""

from __future__ import annotations

import datetime
import fnmatch
import posixpath
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

from ._types import INVALID_PATH

#: The session-directory folder staged files pass through on their way to or from
#: paths outside the session directory; ls and glob leave it out.
STAGING = ".kernelbox-da"

#: Extensions ``read`` returns as base64 without looking inside (Deep Agents' own
#: list: images, video, audio and documents a model reads natively).
BINARY_EXTENSIONS = frozenset(
    ".png .jpeg .jpg .webp .gif .heic .heif .mp4 .mpeg .mov .avi .flv .mpg .webm .wmv .3gpp .mkv "
    ".wav .mp3 .aiff .aac .ogg .flac .pdf .ppt .pptx".split())

#: The most alternatives a pattern's ``{a,b}`` groups may expand to.
MAX_EXPANSIONS = 1000


def check_path(path: Any) -> Optional[str]:
    """Return INVALID_PATH unless path is an absolute str without NUL, ``..`` or ``~``."""
    if not isinstance(path, str) or not path.startswith("/") or "\x00" in path:
        return INVALID_PATH
    if ".." in path.split("/"):
        return INVALID_PATH
    return None


def clean(path: str) -> str:
    """Return the normalised form of an absolute path ("/" stays "/")."""
    return posixpath.normpath(path) if path != "/" else "/"


def is_binary_name(path: str) -> bool:
    """Report whether read returns path whole, as base64, by its extension."""
    return posixpath.splitext(path)[1].lower() in BINARY_EXTENSIONS


def iso(ts: Any) -> str:
    """Return an ISO 8601 time for an RFC 3339 string or a POSIX timestamp."""
    if isinstance(ts, (int, float)):
        return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat()
    return str(ts)


def join(base: str, rel: str) -> str:
    """Join a relative path onto an absolute directory."""
    return base.rstrip("/") + "/" + rel if rel else base


# -- the glob contract (BaseSandbox.glob and grep's include filter)


class PatternError(ValueError):
    """A glob pattern that cannot be used: ``invalid_pattern`` or ``pattern_too_broad``."""


def _group_end(pat: str, start: int) -> int:
    depth = 0
    for i in range(start, len(pat)):
        if pat[i] == "{":
            depth += 1
        elif pat[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _alternatives(body: str) -> List[str]:
    parts, depth, cur = [], 0, []
    for ch in body:
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += (ch == "{") - (ch == "}")
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def expand_braces(pat: str, budget: int = MAX_EXPANSIONS) -> List[str]:
    """Expand ``{a,b}`` groups (nested ones too); a one-item group stays literal.

    Raises PatternError("pattern_too_broad") past budget alternatives.
    """
    start = pat.find("{")
    if start < 0:
        return [pat]
    end = _group_end(pat, start)
    if end < 0:
        return [pat]
    head, body, tail = pat[:start], pat[start + 1:end], pat[end + 1:]
    parts = _alternatives(body)
    if len(parts) < 2:
        return [head + "{" + body + "}" + t for t in expand_braces(tail, budget)]
    out: List[str] = []
    for part in parts:
        for t in expand_braces(part + tail, budget):
            out.append(head + t)
            if len(out) > budget:
                raise PatternError("pattern_too_broad")
    return out


def _negations(pat: str) -> str:
    """Rewrite ``[^...]`` as fnmatch's ``[!...]`` (both mean "not these")."""
    out, i = [], 0
    while i < len(pat):
        if pat[i] != "[":
            out.append(pat[i])
            i += 1
            continue
        close = pat.find("]", i + 2)  # a ']' first in the set is a member
        if close < 0:
            out.append(pat[i:])
            break
        body = pat[i + 1:close]
        out.append("[" + ("!" + body[1:] if body.startswith("^") else body) + "]")
        i = close + 1
    return "".join(out)


def _name_ok(name: str, seg: str) -> bool:
    """One path element against one pattern element; a dot name needs a dot pattern."""
    if name.startswith(".") and not seg.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, seg)


def _parts_ok(names: Tuple[str, ...], segs: Tuple[str, ...]) -> bool:
    @lru_cache(maxsize=None)
    def at(i: int, j: int) -> bool:
        if j == len(segs):
            return i == len(names)
        if segs[j] == "**":
            k = j
            while k < len(segs) and segs[k] == "**":
                k += 1
            if k == len(segs):  # a trailing ** needs at least one element, none hidden
                return i < len(names) and not any(n.startswith(".") for n in names[i:])
            for m in range(i, len(names) + 1):  # ** spans names[i:m], never a hidden one
                if at(m, k):
                    return True
                if m < len(names) and names[m].startswith("."):
                    return False
            return False
        return i < len(names) and _name_ok(names[i], segs[j]) and at(i + 1, j + 1)

    return at(0, 0)


class Glob:
    """A compiled glob, matched against slash-separated paths relative to the searched directory.

    A pattern without ``/`` matches the base name at any depth; one with ``/`` matches
    the whole relative path (a leading ``/`` anchors at the searched directory). ``*``,
    ``?``, ``[abc]``, ``[!a]``/``[^a]``, ``{a,b}`` and ``**`` (any number of elements);
    hidden names (a leading dot) match only a pattern element that starts with a dot,
    and ``**`` does not cross them. Raises PatternError for ``..`` in the pattern
    (``invalid_pattern``) or too many ``{}`` alternatives (``pattern_too_broad``).
    """

    def __init__(self, pattern: str):
        if any(s == ".." for s in pattern.replace("\\", "/").split("/")):
            raise PatternError("invalid_pattern")
        self.pattern = pattern
        self.by_name = "/" not in pattern
        self._cands: List[Tuple[str, Tuple[str, ...]]] = []
        for c in expand_braces(pattern):
            c = _negations(c)
            segs = c.lstrip("/").split("/")
            parts = tuple(s for s in segs if s)
            # a trailing slash asks for directories, which glob never returns (except after **)
            dir_only = len(segs) > 1 and segs[-1] == "" and (not parts or parts[-1] != "**")
            self._cands.append((c, () if dir_only else parts))

    def match(self, rel: str) -> bool:
        """Report whether the relative path rel matches."""
        if self.by_name:
            name = rel.rsplit("/", 1)[-1]
            return any(_name_ok(name, c) for c, _ in self._cands)
        names = tuple(n for n in rel.split("/") if n)
        return any(parts and _parts_ok(names, parts) for _, parts in self._cands)

