"""Code the Deep Agents backend runs in the session's kernel: shell commands, file
operations on paths outside the session directory, and the reads and edits that stay
in the sandbox (a page of a large file never crosses the wire whole).

Each call sends :data:`PRELUDE`, a class, with one operation's function as its method; the kernel prints one
line, ``MARKER`` then JSON, which :func:`parse` reads back. The code is sent every
time (a reset kernel has nothing defined) and leaves nothing behind in the user's
namespace: the one class it defines deletes itself. Paths arrive as JSON data,
never as code or shell text.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any, Dict

MARKER = "\x1ekernelbox-da:"

PRELUDE = r'''
class _KBDA:
    import json, os, shutil, signal, stat, subprocess, threading

    @staticmethod
    def err(e):
        if isinstance(e, (FileNotFoundError, NotADirectoryError)):
            return "file_not_found"
        if isinstance(e, IsADirectoryError):
            return "is_directory"
        if isinstance(e, PermissionError):
            return "permission_denied"
        if isinstance(e, ValueError):
            return "invalid_path"
        return type(e).__name__ + ": " + str(e)

    @staticmethod
    def kind(st):
        S = _KBDA.stat
        return "dir" if S.S_ISDIR(st.st_mode) else "file" if S.S_ISREG(st.st_mode) else \
            "symlink" if S.S_ISLNK(st.st_mode) else "other"
'''

OPS: Dict[str, str] = {}

OPS["sh"] = r'''
def op(a):
    os, subprocess, signal = _KBDA.os, _KBDA.subprocess, _KBDA.signal
    lim, half = a["limit"], a["limit"] // 2
    st = {"head": bytearray(), "tail": bytearray(), "total": 0}
    p = subprocess.Popen(["/bin/sh", "-c", a["cmd"]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True, cwd=a.get("cwd") or None)

    def pump():  # keeps the first half and the last half of the limit
        while True:
            b = p.stdout.read1(1 << 16)
            if not b:
                return
            st["total"] += len(b)
            room = half - len(st["head"])
            if room > 0:
                st["head"] += b[:room]
                b = b[room:]
            if b:
                t = st["tail"]
                t += b
                if len(t) > lim - half:
                    del t[:len(t) - (lim - half)]

    th = _KBDA.threading.Thread(target=pump, daemon=True)
    th.start()
    timed_out = False
    try:
        p.wait(a["timeout"] or None)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:  # also on KeyboardInterrupt: the command's group never outlives the call
        if p.returncode is None or timed_out:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        code = p.wait()
    # A background child (`server &`) may keep the pipe open: it is left running,
    # its later output drained (and bounded) by the reader thread, unread.
    th.join(1)
    if not th.is_alive():
        p.stdout.close()
    dropped = st["total"] - len(st["head"]) - len(st["tail"])
    out = bytes(st["head"])
    if dropped > 0:
        out += ("\n[kernelbox: %d bytes of output dropped here; %d in all, %d kept]\n"
                % (dropped, st["total"], lim)).encode()
    out += bytes(st["tail"])
    code = 124 if timed_out else (128 - code if code < 0 else code)
    return {"output": out.decode("utf-8", "replace"), "exit_code": code, "truncated": dropped > 0,
            "timed_out": timed_out, "total": st["total"]}
'''

# [src, dst] pairs: staged file -> target (put), target -> staged file (get).
OPS["copy"] = r'''
def op(a):
    os, res = _KBDA.os, []
    for src, dst in a["files"]:
        try:
            if os.path.isdir(src) or os.path.isdir(dst):
                raise IsADirectoryError(src if os.path.isdir(src) else dst)
            os.makedirs(os.path.dirname(dst) or "/", exist_ok=True)
            _KBDA.shutil.copyfile(src, dst)
            res.append(None)
        except Exception as e:
            res.append(_KBDA.err(e))
    return res
'''
OPS["put"] = OPS["get"] = OPS["copy"]

# A piece of a file, for a session whose directory the server does not name (remote,
# swarm): nothing can be staged there, so bytes travel in the cell (base64) and back.
OPS["putb"] = r'''
def op(a):
    os, p = _KBDA.os, a["path"]
    try:
        if os.path.isdir(p):
            return {"error": "is_directory"}
        os.makedirs(os.path.dirname(p) or "/", exist_ok=True)
        import base64
        with open(p, "ab" if a["append"] else "wb") as f:
            f.write(base64.b64decode(a["data"]))
        return {}
    except Exception as e:
        return {"error": _KBDA.err(e)}
'''

OPS["getb"] = r'''
def op(a):
    os, p = _KBDA.os, a["path"]
    try:
        if os.path.isdir(p):
            return {"error": "is_directory"}
        import base64
        with open(p, "rb") as f:
            f.seek(a["offset"])
            b = f.read(a["size"])
        return {"data": base64.b64encode(b).decode("ascii"), "eof": len(b) < a["size"]}
    except Exception as e:
        return {"error": _KBDA.err(e)}
'''

OPS["ls"] = r'''
def op(a):
    try:
        out = []
        with _KBDA.os.scandir(a["path"]) as it:
            for e in it:
                s = e.stat(follow_symlinks=False)
                out.append([e.name, _KBDA.kind(s), s.st_size, s.st_mtime])
        return {"entries": sorted(out)}
    except FileNotFoundError:
        return {"error": "path_not_found"}
    except NotADirectoryError:
        return {"error": "not_a_directory"}
    except PermissionError:
        return {"error": "permission_denied"}
'''

OPS["delete"] = r'''
def op(a):
    os, p = _KBDA.os, a["path"]
    if not os.path.lexists(p):
        return {"error": "not_found"}
    try:
        if os.path.isdir(p) and not os.path.islink(p):
            _KBDA.shutil.rmtree(p)
        else:
            os.remove(p)
        return {}
    except Exception as e:
        return {"error": _KBDA.err(e)}
'''

# What is under path: [rel, kind, size, mtime], at most max entries.
OPS["walk"] = r'''
def op(a):
    os, out, base = _KBDA.os, [], a["path"]
    if not os.path.isdir(base):
        return {"error": "path_not_found" if not os.path.lexists(base) else "not_a_directory"}
    errors = []
    for d, dirs, files in os.walk(base, onerror=errors.append):
        dirs.sort()
        for n in sorted(dirs) + sorted(files):
            full = os.path.join(d, n)
            try:
                s = os.lstat(full)
            except OSError:
                continue
            out.append([os.path.relpath(full, base), _KBDA.kind(s), s.st_size, s.st_mtime])
            if len(out) >= a["max"]:
                return {"entries": out, "truncated": True}
    return {"entries": out, "truncated": bool(errors)}
'''

# The literal pattern in the given files, at most max matches (+1 to tell "more").
OPS["grep"] = r'''
def op(a):
    out, pat = [], a["pattern"]
    for f in a["files"]:
        try:
            with open(f, "r", encoding="utf-8", errors="strict") as fh:
                for i, line in enumerate(fh, 1):
                    if pat in line:
                        out.append([f, i, line.rstrip("\n")])
                        if len(out) > a["max"]:
                            return {"matches": out[:a["max"]], "truncated": True}
        except (UnicodeDecodeError, OSError):
            continue
    return {"matches": out, "truncated": False}
'''

# One page of a file, as Deep Agents' BaseSandbox.read answers: the lines of a text
# file (universal newlines, each without its end), whole base64 for a binary one.
OPS["read"] = r'''
def op(a):
    os, S = _KBDA.os, _KBDA.stat
    path, off, lim = a["path"], a["offset"], a["limit"]
    try:
        st = os.stat(path)
        if not S.S_ISREG(st.st_mode):
            return {"error": "not_a_file"}
        if st.st_size == 0:
            return {"encoding": "utf-8", "content": a["empty"]}
        binary = a["binary"]
        if not binary:
            import codecs
            with open(path, "rb") as f:
                try:
                    codecs.getincrementaldecoder("utf-8")().decode(f.read(8192), final=False)
                except UnicodeDecodeError:
                    binary = True
        if binary:
            if st.st_size > a["max_binary"]:
                return {"error": "Binary file exceeds maximum preview size of %d bytes" % a["max_binary"]}
            import base64
            with open(path, "rb") as f:
                return {"encoding": "base64", "content": base64.b64encode(f.read()).decode("ascii")}
        if lim <= 0:
            return {"encoding": "utf-8", "content": "", "no_lines_requested": True}
        parts, n, got, size, cut = [], 0, 0, 0, False
        room = a["max_out"] - len(a["cut_note"].encode())
        eof = False
        with open(path, "r", encoding="utf-8", errors="replace", newline=None) as f:
            while n < off:
                if f.readline() == "":
                    eof = True
                    break
                n += 1
            while not eof and got < lim:
                line = f.readline()
                if line == "":
                    eof = True
                    break
                n += 1
                piece = ("" if got == 0 else "\n") + line.rstrip("\n").rstrip("\r")
                b = len(piece.encode())
                if size + b > room:
                    cut = True
                    keep = piece.encode()[:room - size].decode("utf-8", "ignore")
                    parts.append(keep)
                    break
                parts.append(piece)
                size += b
                got += 1
            if not eof and not cut:
                eof = f.readline() == ""
        if got == 0 and not cut:
            return {"error": "Line offset %d exceeds file length (%d lines)" % (off, n)}
        if eof and not cut:
            total = n
        elif st.st_size <= a["count_max"]:
            with open(path, "r", encoding="utf-8", errors="replace", newline=None) as f:
                total = sum(1 for _ in f)
        else:
            total = None
        got = max(got, 1)
        end = off + got
        text = "".join(parts) + (a["cut_note"] if cut else "")
        nxt = (end if end < total else None) if total is not None else end
        return {"encoding": "utf-8", "content": text, "total_lines": total, "start_line": off + 1,
                "end_line": end, "next_offset": nxt}
    except FileNotFoundError:
        return {"error": "file_not_found"}
    except NotADirectoryError:
        return {"error": "file_not_found"}
    except PermissionError:
        return {"error": "permission_denied"}
'''

# Replace old by new in a text file where it lies; the first of old as given, with
# CRLF line ends, or with LF ones that occurs decides (new follows the same ends).
OPS["edit"] = r'''
def op(a):
    os, S = _KBDA.os, _KBDA.stat
    path, old, new = a["path"], a["old"], a["new"]
    try:
        if not S.S_ISREG(os.stat(path).st_mode):
            return {"error": "not_a_file"}
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"error": "not_a_text_file"}
        lf = lambda s: s.replace("\r\n", "\n")
        crlf = lambda s: lf(s).replace("\n", "\r\n")
        count = 0
        for o, n in ((old, new), (crlf(old), crlf(new)), (lf(old), lf(new))):
            count = text.count(o) if o else 0
            if count:
                break
        if count == 0:
            return {"error": "string_not_found"}
        if count > 1 and not a["replace_all"]:
            return {"error": "multiple_occurrences", "count": count}
        text = text.replace(o, n) if a["replace_all"] else text.replace(o, n, 1)
        with open(path, "wb") as f:
            f.write(text.encode("utf-8"))
        return {"count": count}
    except (FileNotFoundError, NotADirectoryError):
        return {"error": "file_not_found"}
    except PermissionError:
        return {"error": "permission_denied"}
'''

_RUN = r'''
try:
    print(__MARKER__ + _KBDA.json.dumps(_KBDA.op(_KBDA.json.loads(__ARGS__))), flush=True)
finally:
    del _KBDA
'''

# Arguments too large for a cell come in a file of the session directory, read once and removed.
_ARGS_FILE = r'''_KBDA.args(__PATH__)'''
_ARGS_READER = r'''
    @staticmethod
    def args(p):
        try:
            with open(p, "rb") as f:
                return f.read().decode()
        finally:
            _KBDA.os.remove(p)
'''

#: Arguments longer than this (JSON bytes) go in a file instead of the cell (kernelbox
#: bounds a cell's code at 1 MiB).
MAX_INLINE_ARGS = 256 << 10


def encode(args: Dict[str, Any]) -> str:
    """Return args as the JSON the kernel reads."""
    return json.dumps(args)


def program(op: str, args: str, args_path: str = "") -> str:
    """Return the cell that runs op in the kernel (its function a static method of the class)
    with args, the JSON of its arguments, or with the JSON in the file args_path."""
    body = textwrap.indent("@staticmethod" + OPS[op], "    ")
    if args_path:
        src = _ARGS_FILE.replace("__PATH__", repr(args_path))
        body += _ARGS_READER
    else:
        src = repr(args)
    return PRELUDE + body + _RUN.replace("__MARKER__", repr(MARKER)).replace("__ARGS__", src)


def parse(stdout: str) -> Any:
    """Return the JSON the program printed, from the cell's stdout."""
    i = stdout.rfind(MARKER)
    if i < 0:
        raise ValueError("no answer from the kernel: " + stdout[-500:])
    line = stdout[i + len(MARKER):].split("\n", 1)[0]
    return json.loads(line)
