"""kernelbox session files in a remote kernel: the kernel side of the files API
(upload, download, list, delete) for sessions whose files live in the kernel.

This source is appended to kernelsync.py and runs in the same module (it uses
its state, handles and helpers). Paths come from a client of kernelbox and are
untrusted, and the session directory is the user's code's to change at any
moment, so every operation walks the path one element at a time from a
descriptor of the session directory: os.open(name, O_DIRECTORY | O_NOFOLLOW,
dir_fd=parent). No element is looked up again by name from a directory that
could have been swapped meanwhile, no symbolic link is followed anywhere, and
nothing but a regular file is opened (lstat-ed first, then fstat-ed after the
O_NONBLOCK open, so a FIFO never blocks and a device is never opened).

Failures are answers, not exceptions: {"code": ..., "why": ...} with the codes
of kernelbox's API (invalid_path, not_found, is_directory, not_directory,
exists, quota). Tests: test_kernelfiles.py.
"""
import errno as _errno

_DIRFLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _O_NOFOLLOW | _O_CLOEXEC
_MAX_PATH = 4096
_MAX_NAME = 255
_USAGE_MAX = 200000  # entries counted at most by _usage_of


class FileError(Exception):
    """A files-API operation failed with one of the API's codes."""

    def __init__(self, code, why):
        Exception.__init__(self, why)
        self.code, self.why = code, why


def _errs(e):
    """Map an OSError to a FileError with the API's code."""
    code = {
        _errno.ENOENT: "not_found",
        _errno.ELOOP: "invalid_path",
        _errno.EISDIR: "is_directory",
        _errno.ENOTDIR: "not_directory",
        _errno.EEXIST: "exists",
        _errno.ENOTEMPTY: "exists",
        _errno.ENOSPC: "quota",
        getattr(_errno, "EDQUOT", -1): "quota",
        _errno.ENAMETOOLONG: "invalid_path",
    }.get(e.errno, "io")
    return FileError(code, e.strerror or str(e))


def _answer_errors(f):
    def run(a, data):
        try:
            return f(a, data)
        except FileError as e:
            return {"code": e.code, "why": e.why}
        except OSError as e:
            fe = _errs(e)
            return {"code": fe.code, "why": fe.why}
    return run


def _check(rel, allow_root=False):
    """The elements of rel, a path relative to the session directory, under the
    rules of kernelbox's files API (workspace.CheckFilePath), plus the session
    marker, which no client may touch."""
    if not isinstance(rel, str):
        raise FileError("invalid_path", "not a string")
    if rel in ("", "."):
        if allow_root:
            return []
        raise FileError("invalid_path", "empty")
    if len(rel.encode("utf-8", "surrogatepass")) > _MAX_PATH:
        raise FileError("invalid_path", "longer than %d bytes" % _MAX_PATH)
    if rel.startswith("/"):
        raise FileError("invalid_path", "absolute; give a path relative to the session directory")
    if "\0" in rel:
        raise FileError("invalid_path", "contains NUL")
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise FileError("invalid_path", "not valid UTF-8")
    parts = rel.split("/")
    for p in parts:
        if p == "":
            raise FileError("invalid_path", "empty element (a doubled or trailing '/')")
        if p in (".", ".."):
            raise FileError("invalid_path", "%r element" % p)
        if len(p.encode("utf-8")) > _MAX_NAME:
            raise FileError("invalid_path", "an element is longer than %d bytes" % _MAX_NAME)
        if p.startswith(TMP):
            raise FileError("invalid_path", "names kernelbox's temporary files (%s...)" % TMP)
    if parts[0] == MARK:
        raise FileError("invalid_path", "names kernelbox's session marker")
    return parts


def _kind(mode):
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symbolic link"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISREG(mode):
        return "file"
    return "irregular file"


def _top():
    """A descriptor of the session directory, checked to be the one set up."""
    d = _state["dir"]
    if d is None:
        raise NotSetUp("the session directory is not set up")
    try:
        fd = os.open(d, _DIRFLAGS)
    except OSError as e:
        raise FileError("io", "the session directory %s is gone or replaced: %s" % (d, e.strerror))
    st = os.fstat(fd)
    if _state.get("ino") is not None and (st.st_dev, st.st_ino) != _state["ino"]:
        os.close(fd)
        raise FileError("io", "the session directory %s was replaced" % d)
    return fd


def _open_dir(parent, name, create):
    """Open the directory name in parent without following a link; make it first
    (0755) when it is missing and create is set."""
    try:
        return os.open(name, _DIRFLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise FileError("not_found", "no such directory %r" % name)
    except OSError as e:
        if e.errno not in (_errno.ENOTDIR, _errno.ELOOP):
            raise
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            raise e
        if stat.S_ISLNK(st.st_mode):
            raise FileError("invalid_path", "%r is a symbolic link; links are not followed" % name)
        raise FileError("not_directory", "%r is a %s, not a directory" % (name, _kind(st.st_mode)))
    try:
        os.mkdir(name, 0o755, dir_fd=parent)
    except FileExistsError:
        pass
    return _open_dir(parent, name, False)


def _walk(dirs, create):
    """A descriptor of the directory dirs (elements below the session directory)."""
    fd = _top()
    try:
        for name in dirs:
            nxt = _open_dir(fd, name, create)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lstat(dfd, name):
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _usage_of(fd, depth=0, count=None):
    """Bytes of the regular files below the directory fd (links not followed),
    counting at most _USAGE_MAX entries in all."""
    count = count if count is not None else [0]
    total = 0
    with os.scandir(fd) as it:
        for e in it:
            count[0] += 1
            if count[0] > _USAGE_MAX:
                break
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                if depth > 0 or e.name != MARK:
                    total += st.st_size
            elif stat.S_ISDIR(st.st_mode) and depth < 64:
                try:
                    sub = os.open(e.name, _DIRFLAGS, dir_fd=fd)
                except OSError:
                    continue
                try:
                    total += _usage_of(sub, depth + 1, count)
                finally:
                    os.close(sub)
    return total


def _usage():
    fd = _top()
    try:
        return _usage_of(fd)
    finally:
        os.close(fd)


@_answer_errors
def _fput(a, data):
    """Begin an upload to a["rel"]: parents made, the target checked (not a
    directory; absent when a["noover"]), a temporary file opened beside it.
    Answers the handle, the bytes of the session directory (for the host's budget)
    and the size of the file being replaced."""
    parts = _check(a.get("rel"))
    base = parts[-1]
    dfd = _walk(parts[:-1], True)
    try:
        st = _lstat(dfd, base)
        old = 0
        if st is not None:
            if stat.S_ISDIR(st.st_mode):
                raise FileError("is_directory", "is a directory")
            if a.get("noover"):
                raise FileError("exists", "exists already")
            if stat.S_ISREG(st.st_mode):
                old = st.st_size
        used = _usage()
        tmp = "%s%d-%d" % (TMP, os.getpid(), _next_id())
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600, dir_fd=dfd)
    except BaseException:
        os.close(dfd)
        raise
    h = _next_id()
    _handles[h] = {"fd": fd, "tmp": tmp, "dfd": dfd, "base": base, "size": 1 << 62, "mode": 0o644,
                   "sha": hashlib.sha256(), "hashed": 0, "write": True, "noover": bool(a.get("noover"))}
    return {"h": h, "used": used, "old": old}


@_answer_errors
def _fputend(a, data):
    """Finish an upload: check its size and SHA-256, then move it into place (a
    rename, which replaces a link rather than writing through it; with noover a
    hard link, which fails if anything is there)."""
    st = _handle(a, True, end=True)
    fd, tmp, dfd = st["fd"], st["tmp"], st["dfd"]
    try:
        size = os.fstat(fd).st_size
        sha = st["sha"].hexdigest() if st["hashed"] == size else _hash_fd(fd, size)[0]
        if size != a.get("size") or sha != a.get("sha"):
            raise FileError("io", "checksum mismatch: wrote %d bytes with sha256 %s, want %d bytes with %s" % (size, sha, a.get("size"), a.get("sha")))
        os.fchmod(fd, st["mode"])
        os.close(fd)
        fd = None
        if st["noover"]:
            os.link(tmp, st["base"], src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
            os.unlink(tmp, dir_fd=dfd)
        else:
            os.replace(tmp, st["base"], src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        if fd is not None:
            _quiet(os.close, fd)
        _quiet(lambda: os.unlink(tmp, dir_fd=dfd))
        os.close(dfd)
        raise
    os.close(dfd)
    return {"size": size, "sha": sha}


@_answer_errors
def _fget(a, data):
    """Open the regular file a["rel"] for rread/rend."""
    parts = _check(a.get("rel"))
    base = parts[-1]
    dfd = _walk(parts[:-1], False)
    try:
        st = _lstat(dfd, base)
        if st is None:
            raise FileError("not_found", "no such file")
        if stat.S_ISDIR(st.st_mode):
            raise FileError("is_directory", "is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise FileError("invalid_path", "is a %s, not a regular file" % _kind(st.st_mode))
        fd = os.open(base, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=dfd)
    finally:
        os.close(dfd)
    now = os.fstat(fd)
    if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise FileError("not_found", "changed while it was being opened")
    h = _next_id()
    _handles[h] = {"fd": fd, "sha": hashlib.sha256(), "hashed": 0, "write": False, "stat": _stat_of(now)}
    return {"h": h, "stat": _stat_of(now)}


def _entry_type(mode):
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


@_answer_errors
def _flist(a, data):
    """List the directory a["rel"] ("" for the session directory): at most
    a["max"] entries, in the order read, with "truncated" when there were more.
    Temporary files, the marker and names that are not UTF-8 are left out."""
    parts = _check(a.get("rel") or "", allow_root=True)
    maxn = int(a.get("max") or 10000)
    dfd = _walk(parts, False)
    out, truncated = [], False
    try:
        with os.scandir(dfd) as it:
            for e in it:
                name = e.name
                if name.startswith(TMP) or (not parts and name == MARK):
                    continue
                try:
                    name.encode("utf-8")
                except UnicodeEncodeError:
                    continue
                if len(out) == maxn:
                    truncated = True
                    break
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue  # gone meanwhile
                out.append([name, _entry_type(st.st_mode), st.st_size, st.st_mtime_ns])
    finally:
        os.close(dfd)
    out.sort()
    return {"entries": out, "truncated": truncated}


def _rmtree_at(parent, name):
    """Remove the directory name in parent with everything below it, descending
    only through real directories opened without following links."""
    fd = os.open(name, _DIRFLAGS, dir_fd=parent)
    try:
        with os.scandir(fd) as it:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
        for n, isdir in entries:
            try:
                if isdir:
                    _rmtree_at(fd, n)
                else:
                    os.unlink(n, dir_fd=fd)
            except FileNotFoundError:
                pass
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


@_answer_errors
def _frm(a, data):
    """Delete a["rel"]: a file or link itself (never its target), a directory
    only with a["recursive"]."""
    parts = _check(a.get("rel"))
    base = parts[-1]
    dfd = _walk(parts[:-1], False)
    try:
        st = _lstat(dfd, base)
        if st is None:
            raise FileError("not_found", "no such file")
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(base, dir_fd=dfd)
        elif not a.get("recursive"):
            raise FileError("is_directory", "is a directory (remove it recursively)")
        else:
            _rmtree_at(dfd, base)
    finally:
        os.close(dfd)
    return {}


def _abort_files(a, data):
    """abort, knowing uploads' temporary files live beside their target."""
    st = _handles.get(a.get("h"))
    if st is not None and "dfd" in st:
        del _handles[a["h"]]
        _quiet(os.close, st["fd"])
        _quiet(lambda: os.unlink(st["tmp"], dir_fd=st["dfd"]))
        _quiet(os.close, st["dfd"])
        return {}
    return _abort(a, data)


def _setup_files(a, data):
    """setup, recording the session directory's identity so that _top notices
    the directory being replaced (renamed away, a link put in its place)."""
    before = _state["dir"]
    ans = _setup(a, data)
    if _state["dir"] != before or _state.get("ino") is None:
        st = os.stat(_state["dir"], follow_symlinks=False)
        _state["ino"] = (st.st_dev, st.st_ino)
    return ans


_OPS.update({"fput": _fput, "fputend": _fputend, "fget": _fget, "flist": _flist, "frm": _frm,
             "abort": _abort_files, "setup": _setup_files})
