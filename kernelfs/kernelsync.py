"""kernelbox file sync, run inside a remote kernel by kernelbox's remote backend.

The backend installs this source as a module of its own (never in the user's
namespace) and drives it through the user_expressions of silent execute requests:
call() decodes its arguments, runs one operation and returns an object whose repr is
the JSON answer. Bulk data travels in the request's content ("kernelbox" field) when
the kernel lets code read the request being handled, else as a literal argument.

Paths are relative to the session directory (the kernel's working directory after
setup). The host checks every name it receives; the checks here keep honest mistakes
from touching files outside the session directory. Tests: test_kernelsync.py.

Each session incarnation gets a directory of its own, <base>/<sid>-<nonce>, where the
host draws the nonce (128 random bits) for the incarnation: it is created empty (never
reused) and holds a marker file whose mtime a thread of the kernel process refreshes
(the heartbeat). Shutting the kernel down (not restarting it) removes the directory;
one left behind by a crash is removed by a later setup under the same base once its
heartbeat is older than the host's bound. Nothing without a valid marker is touched.
"""
import base64
import hashlib
import json
import os
import re
import shutil
import stat
import threading
import time

TMP = ".kb-tmp-"
UPLOAD = "kb-upload-"
MARK = ".kernelbox-session"  # the marker in each session directory; its mtime is the heartbeat
TRASH = ".kb-trash-"  # a session directory being removed, renamed out of the way first
_SESSION = re.compile(r"[A-Za-z0-9_-]{1,200}-[0-9a-f]{32}\Z")
_TRASHED = re.compile(re.escape(TRASH) + r"[0-9a-f]{32}\Z")
_NONCE = re.compile(r"[0-9a-f]{32}\Z")
_MARK_MAX = 4096
_RACY_NS = 2 * 1000 * 1000 * 1000
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

_state = {"dir": None, "cwd0": None, "beat": None, "hooked": False, "reaper": None}
_handles = {}
_ids = [0]


class SyncError(Exception):
    """A file-sync operation failed; the message says why."""


class _Answer(object):
    __slots__ = ("text",)

    def __init__(self, value):
        self.text = value if isinstance(value, _Raw) else json.dumps(value, separators=(",", ":"))

    def __repr__(self):
        return self.text


class _Raw(str):
    """An answer sent as is (base64 data), sparing a JSON pass on both sides."""


class NotSetUp(SyncError):
    """The kernel process has not been set up (it is new or was restarted)."""


def call(args, data=None):
    """Run one operation. args is base64 of the JSON {"op", "args", "seq"}: seq
    numbers the operation's payload, which is data when given (a literal), else
    the "kernelbox" field of the request being handled."""
    msg = json.loads(base64.b64decode(args).decode("utf-8"))
    op = _OPS.get(msg.get("op"))
    if op is None:
        raise SyncError("unknown operation %r" % (msg.get("op"),))
    a = msg.get("args") or {}
    a["seq"] = msg.get("seq")
    return _Answer(op(a, data))


def _parent():
    """The message being handled, through public API: the shell's get_parent(), else
    the kernel's get_parent("shell"). test_ipykernel_pin.py pins the behaviour."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        get = getattr(shell, "get_parent", None) or getattr(getattr(shell, "kernel", None), "get_parent", None)
        parent = get() if get is not None else {}
    except Exception:
        return {}
    return parent if isinstance(parent, dict) else {}


def _from_parent(a):
    content = _parent().get("content")
    kb = content.get("kernelbox") if isinstance(content, dict) else None
    if not isinstance(kb, dict) or a.get("seq") is None or kb.get("seq") != a.get("seq"):
        return None
    return kb.get("data")


def _payload(a, data):
    if data is None:
        data = _from_parent(a)
        if data is None:
            raise SyncError("the request carries no payload")
    return base64.b64decode(data)


def _path(rel):
    d = _state["dir"]
    if d is None:
        raise NotSetUp("the session directory is not set up")
    parts = rel.split("/")
    if not rel or rel.startswith("/") or "\0" in rel or any(p in ("", ".", "..") for p in parts):
        raise SyncError("bad path %r" % (rel,))
    return os.path.join(d, *parts)


def _next_id():
    _ids[0] += 1
    return _ids[0]


def _sweep(d):
    for sub in ("inputs", "data"):
        try:
            names = os.listdir(os.path.join(d, sub))
        except OSError:
            continue
        for name in names:
            if name.startswith(TMP) or name.startswith(UPLOAD):
                _quiet(os.unlink, os.path.join(d, sub, name))


def _setup(a, data):
    """Enter the session's directory: a new one, <base>/<sid>-<nonce>, created empty
    (an existing one is an error: the nonce is never reused), or the known one again
    for a restarted kernel process (recreated empty if it was reaped meanwhile, which
    the answer's "made" says). A new directory's siblings whose heartbeat is older
    than a["reap"] seconds are removed meanwhile, by a thread of their own: the
    session does not wait for someone else's files to be deleted."""
    known = a.get("known") or ""
    parent = _from_parent(a) == ""
    if _state["dir"] is not None and (not known or known == _state["dir"]):
        return {"dir": _state["dir"], "cwd0": _state["cwd0"], "new": False, "parent": parent}
    after = float(a.get("reap") or 3600)
    cwd0 = os.getcwd()
    if known:
        d = known
        made = _mkdir(d, exist_ok=True)
    else:
        sid, nonce = a.get("sid") or "", a.get("nonce") or ""
        if not _SESSION.match("%s-%s" % (sid, nonce)) or not _NONCE.match(nonce):
            raise SyncError("bad session directory name %r-%r" % (sid, nonce))
        base = os.path.abspath(os.path.expanduser(a["base"]))
        d = os.path.join(base, "%s-%s" % (sid, nonce))
        os.makedirs(base, 0o711, exist_ok=True)
        made = _mkdir(d, exist_ok=False)
        _state["reaper"] = threading.Thread(target=reap, args=(base, after, d), name="kernelbox-reaper", daemon=True)
        _state["reaper"].start()
    _mark(d)
    for sub in ("inputs", "outputs"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    os.chdir(d)
    _state["dir"], _state["cwd0"] = d, cwd0
    _sweep(d)
    _start_heartbeat(d, after)
    _hook_shutdown()
    return {"dir": d, "cwd0": cwd0, "new": True, "made": made, "parent": parent, "pid": os.getpid()}


def _mkdir(d, exist_ok):
    """Make d, mode 0700; report whether it was made. An existing d must be a real
    directory (not a symlink) when exist_ok, and is an error otherwise."""
    os.makedirs(os.path.dirname(d), 0o711, exist_ok=True)
    try:
        os.mkdir(d, 0o700)
        return True
    except FileExistsError:
        if not exist_ok:
            raise SyncError("the session directory %s exists already" % (d,))
    if not stat.S_ISDIR(os.lstat(d).st_mode):
        raise SyncError("the session directory %s is not a directory" % (d,))
    return False


def _mark(d):
    """Write d's marker, owned by this process; its mtime is the heartbeat."""
    info = json.dumps({"kernelbox": 1, "pid": os.getpid(), "time": time.time()}).encode("utf-8")
    fd, tmp = _new_temp(os.path.join(d, MARK))
    try:
        _pwrite_all(fd, info, 0)
        _finish(fd, tmp, os.path.join(d, MARK), 0o600)
    except BaseException:
        _discard(fd, tmp)
        raise


def _beat_interval(after):
    return max(0.2, min(60.0, after / 4.0))


def _start_heartbeat(d, after):
    """Refresh d's marker every _beat_interval(after) seconds from a daemon thread,
    for as long as the process lives and the marker is there (an idle session stays
    alive for the reaper, however long it sits)."""
    old = _state["beat"]
    if old is not None:
        old.set()
    stop = threading.Event()
    _state["beat"] = stop
    mark, every = os.path.join(d, MARK), _beat_interval(after)

    def run():
        while not stop.wait(every):
            try:
                os.utime(mark, follow_symlinks=False)
            except OSError:
                return  # the directory was removed

    threading.Thread(target=run, name="kernelbox-heartbeat", daemon=True).start()


def _hook_shutdown():
    """Have the kernel remove the session directory when it is shut down (not
    restarted), through Kernel.do_shutdown(restart), ipykernel's documented hook
    for shutdown work (pinned by test_ipykernel_pin.py)."""
    if _state["hooked"]:
        return
    try:
        from IPython import get_ipython

        kernel = getattr(get_ipython(), "kernel", None)
        orig = kernel.do_shutdown
    except Exception:
        return  # not in a kernel: the reaper removes the directory in time
    _state["hooked"] = True

    def do_shutdown(restart):
        if not restart:
            remove()
        return orig(restart)

    kernel.do_shutdown = do_shutdown


def remove():
    """Remove this process's session directory and stop its heartbeat."""
    d = _state["dir"]
    if d is None:
        return
    if _state["beat"] is not None:
        _state["beat"].set()
    _state["dir"] = None
    _quiet(os.chdir, _state["cwd0"] or "/")
    trash = os.path.join(os.path.dirname(d), TRASH + os.urandom(16).hex())
    try:
        os.rename(d, trash)
    except OSError:
        return
    _remove_tree(trash)


def _remove_tree(d):
    """Remove d with the marker last, so that a removal cut short is retried by a
    later reaper, which needs the marker to touch d."""
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        if name == MARK:
            continue
        p = os.path.join(d, name)
        try:
            if stat.S_ISDIR(os.lstat(p).st_mode):
                shutil.rmtree(p, ignore_errors=True)
            else:
                os.unlink(p)
        except OSError:
            pass
    _quiet(os.unlink, os.path.join(d, MARK))
    _quiet(os.rmdir, d)


def _marked(d):
    """The mtime of d's marker when d is a real directory with a valid marker
    (a regular file with kernelbox's JSON), else None."""
    try:
        if not stat.S_ISDIR(os.lstat(d).st_mode):
            return None
        fd, st = _open_regular(os.path.join(d, MARK))
    except (OSError, SyncError):
        return None
    try:
        if st.st_size > _MARK_MAX:
            return None
        info = json.loads(os.pread(fd, _MARK_MAX, 0).decode("utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
    if not isinstance(info, dict) or info.get("kernelbox") != 1:
        return None
    return st.st_mtime


def reap(base, after, keep=None):
    """Remove the session directories under base whose heartbeat is older than
    after seconds, and leftovers of cut-short removals. Only entries named as
    kernelbox names them (<sid>-<32 hex>, .kb-trash-<32 hex>) that hold a valid
    marker are touched. Returns the names removed."""
    now = time.time()
    try:
        names = os.listdir(base)
    except OSError:
        return []
    gone = []
    for name in sorted(names):
        d = os.path.join(base, name)
        trashed = _TRASHED.match(name) is not None
        if d == keep or not (trashed or _SESSION.match(name)):
            continue
        beat = _marked(d)
        if beat is None or not trashed and now - beat <= after:
            continue
        if not trashed:
            # Out of the way first: a name that no longer matches is never
            # reaped twice at once, nor entered by its owner meanwhile.
            t = os.path.join(base, TRASH + os.urandom(16).hex())
            try:
                os.rename(d, t)
            except OSError:
                continue
            d = t
        _remove_tree(d)
        gone.append(name)
    return gone


def _stat_of(st):
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def _stat(a, data):
    out = {}
    for rel in a["rels"]:
        try:
            st = os.lstat(_path(rel))
            out[rel] = _stat_of(st) if stat.S_ISREG(st.st_mode) else None
        except OSError:
            out[rel] = None
    return out


def _open_regular(path):
    fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise SyncError("not a regular file")
    return fd, st


def _hash_fd(fd, limit):
    h = hashlib.sha256()
    off = 0
    while True:
        b = os.pread(fd, 1 << 20, off)
        if not b:
            break
        h.update(b)
        off += len(b)
        if off > limit:
            break
    return h.hexdigest(), off


def _sums(a, data):
    out = {}
    for rel in a["rels"]:
        try:
            fd, st = _open_regular(_path(rel))
        except (OSError, SyncError):
            out[rel] = None
            continue
        try:
            out[rel] = _hash_fd(fd, a.get("limit") or 1 << 62)[0]
        finally:
            os.close(fd)
    return out


def _new_temp(dst):
    parent = os.path.dirname(dst)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, "%s%d-%d" % (TMP, os.getpid(), _next_id()))
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600)
    return fd, tmp


def _pwrite_all(fd, b, off):
    view = memoryview(b)
    while view:
        n = os.pwrite(fd, view, off)
        view, off = view[n:], off + n


def _finish(fd, tmp, dst, mode):
    os.fchmod(fd, mode)
    os.close(fd)
    os.replace(tmp, dst)


def _wfile(a, data):
    b = _payload(a, data)
    sha = hashlib.sha256(b).hexdigest()
    if len(b) != a["size"] or sha != a["sha"]:
        raise SyncError("checksum mismatch: got %d bytes with sha256 %s, want %d bytes with %s" % (len(b), sha, a["size"], a["sha"]))
    dst = _path(a["rel"])
    fd, tmp = _new_temp(dst)
    try:
        _pwrite_all(fd, b, 0)
        _finish(fd, tmp, dst, a.get("mode", 0o644))
    except BaseException:
        _discard(fd, tmp)
        raise
    return {"size": len(b), "sha": sha, "stat": _stat_of(os.lstat(dst))}


def _quiet(f, *args):
    """f(*args), ignoring an OSError: for clean-up that may find nothing to do."""
    try:
        f(*args)
    except OSError:
        pass


def _discard(fd, tmp):
    _quiet(os.close, fd)
    _quiet(os.unlink, tmp)


def _wbegin(a, data):
    dst = _path(a["rel"])
    fd, tmp = _new_temp(dst)
    h = _next_id()
    _handles[h] = {"fd": fd, "tmp": tmp, "dst": dst, "size": a["size"], "mode": a.get("mode", 0o644),
                   "sha": hashlib.sha256(), "hashed": 0, "write": True}
    return {"h": h}


def _handle(a, write, end=False):
    st = _handles.get(a["h"])
    if st is None or st["write"] != write:
        raise SyncError("unknown transfer handle %r" % (a["h"],))
    if end:
        del _handles[a["h"]]
    return st


def _wput(a, data):
    st = _handle(a, True)
    b = _payload(a, data)
    off = a.get("off", 0)
    if off < 0 or off + len(b) > st["size"]:
        raise SyncError("chunk at %d+%d is outside the file's %d bytes" % (off, len(b), st["size"]))
    _pwrite_all(st["fd"], b, off)
    if off == st["hashed"]:
        st["sha"].update(b)
        st["hashed"] += len(b)
    return {"n": len(b)}


def _wend(a, data):
    st = _handle(a, True, end=True)
    fd, tmp = st["fd"], st["tmp"]
    try:
        size = os.fstat(fd).st_size
        if st["hashed"] == size:
            sha = st["sha"].hexdigest()
        else:  # chunks arrived out of order: hash what is on disk
            sha = _hash_fd(fd, size)[0]
        if size != st["size"] or sha != a.get("sha"):
            raise SyncError("checksum mismatch: wrote %d bytes with sha256 %s, want %d bytes with %s" % (size, sha, st["size"], a.get("sha")))
        _finish(fd, tmp, st["dst"], st["mode"])
    except BaseException:
        _discard(fd, tmp)
        raise
    return {"size": size, "sha": sha, "stat": _stat_of(os.lstat(st["dst"]))}


def _abort(a, data):
    st = _handles.pop(a["h"], None)
    if st is not None:
        if st["write"]:
            _discard(st["fd"], st["tmp"])
        else:
            os.close(st["fd"])
    return {}


def _commit(a, data):
    """Verify a file uploaded through the Contents API and move it into place."""
    src, dst = _path(a["src"]), _path(a["rel"])
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        fd, st = _open_regular(src)
    except OSError as e:
        raise SyncError("uploaded file %s: %s" % (a["src"], e.strerror))
    try:
        sha, size = _hash_fd(fd, a["size"])
        if size != a["size"] or sha != a["sha"]:
            raise SyncError("checksum mismatch: uploaded %d bytes with sha256 %s, want %d bytes with %s" % (size, sha, a["size"], a["sha"]))
        os.fchmod(fd, a.get("mode", 0o644))
    except BaseException:
        os.close(fd)
        _quiet(os.unlink, src)
        raise
    os.close(fd)
    os.replace(src, dst)
    return {"size": size, "sha": sha, "stat": _stat_of(os.lstat(dst))}


def _rm(a, data):
    _quiet(os.unlink, _path(a["rel"]))
    return {}


def _scan(maxn, maxdepth):
    if _state["dir"] is None:
        raise NotSetUp("the session directory is not set up")
    root = os.path.join(_state["dir"], "outputs")
    if os.path.islink(root):
        return [], [["", "outputs/ is a symlink"]], False
    files, skipped = [], []
    count, truncated = 0, False
    stack = [("", 0)]
    while stack and not truncated:
        prefix, depth = stack.pop()
        try:
            it = os.scandir(os.path.join(root, prefix) if prefix else root)
        except FileNotFoundError:
            continue
        except OSError as e:
            skipped.append([prefix, "unreadable directory: %s" % (e.strerror,)])
            continue
        with it:
            for e in it:
                count += 1
                if count > maxn:
                    truncated = True
                    break
                rel = prefix + "/" + e.name if prefix else e.name
                try:
                    rel.encode("utf-8")
                except UnicodeEncodeError:
                    skipped.append([rel.encode("utf-8", "replace").decode("utf-8"), "name is not UTF-8"])
                    continue
                try:
                    if e.is_symlink():
                        skipped.append([rel, "symlink"])
                    elif e.is_dir(follow_symlinks=False):
                        if depth + 1 > maxdepth:
                            skipped.append([rel, "more than %d levels deep" % maxdepth])
                        else:
                            stack.append((rel, depth + 1))
                    elif e.is_file(follow_symlinks=False):
                        files.append([rel] + _stat_of(e.stat(follow_symlinks=False)))
                    else:
                        skipped.append([rel, "not a regular file"])
                except OSError:
                    continue  # gone since the directory was read
    files.sort()
    skipped.sort()
    return files, skipped, truncated


def _listing(fp, maxn, maxdepth, inline):
    files, skipped, truncated = _scan(maxn, maxdepth)
    now = time.time_ns()
    # hash() is salted per process: a restarted kernel just lists once more.
    mine = "%x" % (hash((tuple(tuple(f) for f in files), tuple(tuple(k) for k in skipped), truncated)) & (2**64 - 1))
    if any(f[2] > now - _RACY_NS for f in files):
        # A file modified this recently may change again without its stat changing.
        mine += "-%d" % now
    if mine == fp:
        return None
    ans = {"fp": mine, "skipped": skipped, "truncated": truncated, "now": now}
    if len(files) <= inline:
        ans["files"] = files
    else:
        ans["more"] = True
    return ans


def _probe(a, data):
    """Answer whether outputs/ changed since the listing whose fingerprint is a["fp"]."""
    return _listing(a["fp"], a["max"], a["depth"], a["inline"]) or {"same": True}


class _Unchanged(object):
    """probe()'s answer when outputs/ is unchanged. IPython formats a user expression's
    value with every display formatter (0.25 ms per call); _ipython_display_ stops it
    at the first, leaving no data: "unchanged" to the host (pinned by
    test_ipykernel_pin.py). repr() says "0" when the display formatter is off."""

    __slots__ = ()

    def _ipython_display_(self):
        pass

    def __repr__(self):
        return "0"


_UNCHANGED = _Unchanged()


def probe(fp, maxn, maxdepth, inline):
    """The per-call check, evaluated after the user's code: _UNCHANGED when outputs/
    is unchanged, else the listing."""
    ans = _listing(fp, maxn, maxdepth, inline)
    return _UNCHANGED if ans is None else _Answer(ans)


def _read_all(fd, limit):
    chunks, n = [], 0
    while n <= limit:
        b = os.pread(fd, min(1 << 20, limit + 1 - n), n)
        if not b:
            break
        chunks.append(b)
        n += len(b)
    return b"".join(chunks)


def _rmany(a, data):
    """Read several small files whole, within a byte budget."""
    out, budget = [], a["budget"]
    for rel in a["rels"]:
        try:
            fd, st = _open_regular(_path(rel))
        except (OSError, SyncError) as e:
            out.append({"rel": rel, "err": getattr(e, "strerror", None) or str(e)})
            continue
        try:
            b = _read_all(fd, budget) if st.st_size <= budget else b""
            if st.st_size > budget or len(b) > budget:
                out.append({"rel": rel, "big": True, "size": max(st.st_size, len(b))})
                continue
            st2 = os.fstat(fd)
            budget -= len(b)
            out.append({"rel": rel, "data": base64.b64encode(b).decode("ascii"),
                        "sha": hashlib.sha256(b).hexdigest(), "stat": _stat_of(st2),
                        "changed": st2.st_mtime_ns != st.st_mtime_ns or st2.st_size != len(b)})
        finally:
            os.close(fd)
    return {"files": out}


def _ropen(a, data):
    fd, st = _open_regular(_path(a["rel"]))
    h = _next_id()
    _handles[h] = {"fd": fd, "sha": hashlib.sha256(), "hashed": 0, "write": False, "stat": _stat_of(st)}
    return {"h": h, "stat": _stat_of(st)}


def _rread(a, data):
    st = _handle(a, False)
    off, n = a.get("off", 0), a.get("n", 0)
    chunks, got = [], 0
    while got < n:
        b = os.pread(st["fd"], n - got, off + got)
        if not b:
            break
        chunks.append(b)
        got += len(b)
    b = b"".join(chunks)
    if off == st["hashed"]:
        st["sha"].update(b)
        st["hashed"] += len(b)
    return _Raw(base64.b64encode(b).decode("ascii"))


def _rend(a, data):
    st = _handle(a, False, end=True)
    fd = st["fd"]
    try:
        now = _stat_of(os.fstat(fd))
        size = a.get("size", 0)
        if st["hashed"] == size:
            sha = st["sha"].hexdigest()
        else:
            sha = _hash_fd(fd, size)[0]
    finally:
        os.close(fd)
    return {"sha": sha, "stat": now, "changed": now[0] != st["stat"][0] or now[1] != st["stat"][1]}


_OPS = {name: globals()["_" + name] for name in (
    "setup", "stat", "sums", "wfile", "wbegin", "wput", "wend", "abort", "commit", "rm",
    "probe", "rmany", "ropen", "rread", "rend")}
