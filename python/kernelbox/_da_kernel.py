"""Code the Deep Agents backend runs in the session's kernel: shell commands and file
operations on paths outside the session directory.

Each call sends :data:`PROGRAM` with one operation; the kernel prints one line,
``MARKER`` then JSON, which :func:`parse` reads back. The program is sent whole
every time (about 4 KB): a reset kernel has nothing defined, and nothing is left
behind in the user's namespace (the one class it defines deletes itself).
"""

from __future__ import annotations

import json
from typing import Any, Dict

MARKER = "\x1ekernelbox-da:"

PROGRAM = r'''
class _KBDA:
    import json, os, shutil, signal, subprocess, threading

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
    def cwd(a):
        return _KBDA.os.getcwd()

    @staticmethod
    def sh(a):
        os, subprocess, signal = _KBDA.os, _KBDA.subprocess, _KBDA.signal
        lim, half = a["limit"], a["limit"] // 2
        st = {"head": bytearray(), "tail": bytearray(), "total": 0}
        p = subprocess.Popen(["/bin/sh", "-c", a["cmd"]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)

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

    @staticmethod
    def copy(a):  # [src, dst] pairs: staged file -> target (put), target -> staged file (get)
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

    put = get = copy

    @staticmethod
    def ls(a):
        try:
            out = []
            with _KBDA.os.scandir(a["path"]) as it:
                for e in it:
                    s = e.stat(follow_symlinks=False)
                    out.append([e.name, e.is_dir(follow_symlinks=False), s.st_size, s.st_mtime])
            return {"entries": sorted(out)}
        except Exception as e:
            return {"error": _KBDA.err(e)}

    @staticmethod
    def delete(a):
        os, p = _KBDA.os, a["path"]
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                _KBDA.shutil.rmtree(p)
            else:
                os.remove(p)
            return {}
        except Exception as e:
            return {"error": _KBDA.err(e)}

    @staticmethod
    def walk(a):  # what is under path: [rel, is_dir, size, mtime], at most max
        os, out, base = _KBDA.os, [], a["path"]
        if not os.path.isdir(base):
            return {"error": "file_not_found" if not os.path.exists(base) else "not a directory: " + base}
        for d, dirs, files in os.walk(base):
            dirs.sort()
            for n in sorted(dirs) + sorted(files):
                full = os.path.join(d, n)
                try:
                    s = os.lstat(full)
                except OSError:
                    continue
                out.append([os.path.relpath(full, base), n in dirs, s.st_size, s.st_mtime])
                if len(out) >= a["max"]:
                    return {"entries": out, "truncated": True}
        return {"entries": out, "truncated": False}

    @staticmethod
    def grep(a):  # the literal pattern in the given files, at most max matches
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

try:
    print(__MARKER__ + _KBDA.json.dumps(getattr(_KBDA, __OP__)(_KBDA.json.loads(__ARGS__))), flush=True)
finally:
    del _KBDA
'''


def program(op: str, args: Dict[str, Any]) -> str:
    """Return the cell that runs op with args in the kernel."""
    return (PROGRAM.replace("__MARKER__", repr(MARKER)).replace("__OP__", repr(op))
            .replace("__ARGS__", repr(json.dumps(args))))


def parse(stdout: str) -> Any:
    """Return the JSON the program printed, from the cell's stdout."""
    i = stdout.rfind(MARKER)
    if i < 0:
        raise ValueError("no answer from the kernel: " + stdout[-500:])
    line = stdout[i + len(MARKER):].split("\n", 1)[0]
    return json.loads(line)
