# kernelbox's namespace snapshot, run INSIDE a session's own kernel (never on the
# host, never in kernelbox's process: unpickling runs code). The executor sends this
# file's text followed by one call, _kb_save(...) or _kb_load(...), in a private
# globals dict, so nothing here lands in the user's namespace; the call prints one
# line "\x1ekernelbox-snapshot <json>" that the executor reads.
#
# File format (version 2), all integers big-endian, written front to back in one pass:
#   b"KBSNAP2\n"                     magic and format version
#   per saved name, in the index's order: its pickle, then the bytes of each buffer
#     the pickle took out of band (protocol 5: a NumPy array's or a DataFrame block's
#     data is written straight from the array, never copied into the pickle)
#   the index, JSON: {"format":2,"dill":..,"python":..,"names":[..],"records":
#     [{"name","kind","len","sum","bufs":[[len,sum],..]}],"modules":{name:module},
#     "skipped":{name:why}}; kind "p" is the C pickle, "d" dill; sum is Adler-32
#   b"KBEND" + u32 Adler-32 of the index + u64 the index's offset + u64 its length
# Every byte between the magic and the index belongs to exactly one checked region,
# so a flipped byte anywhere is found, and the whole file is read and checked before
# anything in it is unpickled. Version 1 files (one CRC-32 over the file, pickles
# only in band) are still read, so a session hibernated by an older kernelbox
# resumes after an upgrade.
# A value is pickled by the C pickler when it can be (fast: a NumPy array or a
# DataFrame); one that needs anything defined in the session itself (a function,
# a lambda, a class, an instance of such a class) or that the C pickler refuses
# goes to dill, which pickles those by value.
# It is written to a temporary name beside the final one, fsynced and renamed, so a
# crash never leaves a half file under the final name; the checksums catch a
# truncated or corrupted file before anything in it is unpickled (they are no defence
# against a deliberate edit: the session's own code can write the file, and a
# snapshot is only ever loaded in that session's kernel).
# Speed: nothing is pickled into memory first (a large namespace would need twice
# its size), the arrays' data goes from the arrays to the file, and on load each
# buffer is read once into the memory the restored array then uses.
import io, json, os, pickle, struct, sys, types, zlib

_KB_MAGIC = b"KBSNAP2\n"
_KB_MAGIC_V1 = b"KBSNAP1\n"
_KB_END = b"KBEND"
_KB_FORMAT = 2
_KB_TRAILER = 5 + 4 + 8 + 8
_KB_TRAILER_V1 = 5 + 4 + 8
_KB_MAX_INDEX = 64 << 20


class _KbNeedsDill(Exception):
    pass


def _kb_is_file(obj):
    """Whether obj is a file object of the operating system's (open or closed): one
    that a pickler would re-open by name and mode on load. An in-memory BytesIO or
    StringIO holds its data and is pickled as any value."""
    return isinstance(obj, io.IOBase) and not isinstance(obj, (io.BytesIO, io.StringIO))


def _kb_file_desc(f):
    name, mode = getattr(f, "name", "?"), getattr(f, "mode", "?")
    state = "a closed" if getattr(f, "closed", False) else "an open"
    return "%s file object (%r, mode %r)" % (state, name, mode)


def _kb_stand_in(pickler, obj):
    """The reduction of a file object found inside a saved value: a closed stand-in
    with its name and mode, never a file re-opened (dill re-opens files in their saved
    mode, and "w" would empty the file)."""
    pickler.kb_files.append(_kb_file_desc(obj))
    return (types.SimpleNamespace, (), {"name": getattr(obj, "name", None), "mode": getattr(obj, "mode", None),
                                        "closed": True, "kernelbox": "a file object is never re-opened by a restore"})


class _KbPickler(pickle.Pickler):
    """The C pickler, refusing what it would save by a reference into __main__, and
    saving file objects as closed stand-ins."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.kb_files = []

    def reducer_override(self, obj):
        if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__":
            raise _KbNeedsDill()
        if _kb_is_file(obj):
            return _kb_stand_in(self, obj)
        return NotImplemented


def _kb_dill_pickler(dill):
    """dill's pickler with the same file rule as _KbPickler (dill's own would re-open
    a file in its saved mode on load)."""

    class _KbDillPickler(dill.Pickler):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.kb_files = []

        def reducer_override(self, obj):
            if _kb_is_file(obj):
                return _kb_stand_in(self, obj)
            return NotImplemented

    return _KbDillPickler


def _kb_dill_loads(dill, p, notes):
    """dill.loads, except that a file object in the pickle (a snapshot written before
    file objects were saved as stand-ins, or one the session's own code wrote) comes
    back as a closed stand-in instead of being re-opened: a restore never changes a
    file. notes gets a line per file object."""

    def stand_in(name, mode, *_):
        notes.append("closed file object (%r, mode %r)" % (name, mode))
        return types.SimpleNamespace(name=name, mode=mode, closed=True,
                                     kernelbox="a file object is never re-opened by a restore")

    class _KbDillUnpickler(dill.Unpickler):
        def find_class(self, module, name):
            if name == "_create_filehandle" and module.startswith("dill"):
                return stand_in
            return super().find_class(module, name)

    return _KbDillUnpickler(io.BytesIO(p)).load()


class _KbOut:
    """The snapshot file as a pickler sees it: counts and sums what is written."""

    def __init__(self, f):
        self.f, self.n, self.sum = f, 0, 1

    def reset(self):
        self.n, self.sum = 0, 1

    def write(self, b):
        self.sum = zlib.adler32(b, self.sum)
        self.n += len(b)
        return self.f.write(b)


def _kb_dump(out, v, dill_pickler):
    """Pickles v into out; returns (kind, out-of-band buffers, the file objects in v
    saved as closed stand-ins). On an exception the file is back where it was."""
    f, start = out.f, out.f.tell()

    def rewind():
        f.seek(start)
        f.truncate()
        out.reset()

    out.reset()
    bufs = []
    try:
        p = _KbPickler(out, protocol=5, buffer_callback=bufs.append)
        p.dump(v)
        return "p", bufs, p.kb_files
    except Exception:  # _KbNeedsDill, or a type the C pickler cannot save
        rewind()
    try:
        p = dill_pickler(out)  # functions keep the namespace as their globals
        p.dump(v)
        return "d", [], p.kb_files
    except BaseException:
        rewind()
        raise


def _kb_raw(pb):
    try:
        return pb.raw()
    except BufferError:  # not contiguous: one copy
        return memoryview(bytes(pb))


def _kb_report(obj):
    sys.stdout.write("\x1ekernelbox-snapshot " + json.dumps(obj) + "\n")
    sys.stdout.flush()


# Module attributes every kernel has of its own: not the user's names.
_KB_MODULE_ATTRS = frozenset(("__name__", "__doc__", "__package__", "__loader__", "__spec__", "__builtins__",
                              "__builtin__", "__file__", "__cached__"))


def _kb_is_cache(name):
    """Whether name is one IPython keeps its input and output history under."""
    if name in ("In", "Out", "_ih", "_oh", "_dh", "_", "__", "___", "_i", "_ii", "_iii"):
        return True
    return (name.startswith("_i") and name[2:].isdigit()) or (name.startswith("_") and name[1:].isdigit())


def _kb_user_names(ip):
    """Returns (the user's names, sorted; how many of IPython's own history caches
    were left out). IPython marks what it puts in the namespace itself (its setup:
    get_ipython, exit, quit, In, Out; and each history entry it pushes: _, _5, _i5)
    by keeping the same object in user_ns_hidden. A name is IPython's only while it
    still holds that very object: a user's `_1 = 5`, `exit = 7` or `In = []` is the
    user's and saved; so is a private `__secret`."""
    ns, hidden = ip.user_ns, getattr(ip, "user_ns_hidden", {})
    out, caches = [], 0
    for name in list(ns):
        v = ns[name]
        if name in hidden and v is hidden[name]:
            caches += _kb_is_cache(name)
            continue
        if name in _KB_MODULE_ATTRS:
            continue
        out.append(name)
    return sorted(out), caches


# The key under which a snapshot lists IPython's history caches, skipped by design.
_KB_CACHES_KEY = "IPython's history caches"


def _kb_why(e):
    s = "%s: %s" % (type(e).__name__, e)
    return s if len(s) <= 300 else s[:300] + "…"


# The temporary names of a session's snapshot and checkpoint (executor's SnapshotFile and
# CheckpointFile) while they are written.
_KB_TEMPS = (".kernelbox-snapshot.tmp-", ".kernelbox-checkpoint.tmp-")


def _kb_sweep(path):
    """Removes the half files a writer killed mid-save left beside path (a kernel killed
    with kernelbox, an OOM): only the session's one kernel writes there, and it is not
    writing now, so each is stale; left, it would hold disk against the session's quota."""
    d = os.path.dirname(path) or "."
    try:
        names = os.listdir(d)
    except OSError:
        return
    for n in names:
        if n.startswith(_KB_TEMPS):
            try:
                os.unlink(os.path.join(d, n))  # a link is removed, never followed
            except OSError:
                pass


def _kb_save(path, limit, meta=None):
    """Saves the namespace to path. meta (JSON) is kept in the index as it is and
    reported by the load that reads this very file: a checkpoint names its call."""
    _kb_sweep(path)
    try:
        import dill
    except ImportError as e:
        _kb_report({"error": "python3-dill is not installed in the kernel (%s); rebuild the kernel image (kernelbox image build)" % e})
        return
    tmp = "%s.tmp-%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            r, index = _kb_write(f, get_ipython(), dill, limit, meta)
            if r is not None:  # too big
                f.close()
                os.unlink(tmp)
                _kb_report(r)
                return
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        size = os.path.getsize(path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _kb_report({"error": "writing the snapshot: " + _kb_why(e), "nospace": e.errno in (28, 122)})
        return
    except BaseException:  # an interrupt (a checkpoint past its time): no partial file is left
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _kb_report({"ok": True, "bytes": size, "names": index["names"], "modules": index["modules"],
                "skipped": index["skipped"], "changed": index["changed"], "by_design": index["by_design"]})


def _kb_write(f, ip, dill, limit, meta=None):
    """Writes the namespace to f (format 2). Returns (a too_big report, None) or
    (None, the index written)."""
    ns = ip.user_ns
    names, records, modules, skipped, changed, total = [], [], {}, {}, {}, 0
    f.write(_KB_MAGIC)
    out = _KbOut(f)
    dill_pickler = _kb_dill_pickler(dill)
    user, caches = _kb_user_names(ip)
    for name in user:
        v = ns[name]
        if isinstance(v, types.ModuleType):
            modules[name] = v.__name__
            continue
        if _kb_is_file(v):
            skipped[name] = ("%s: a restore never re-opens a file (re-opening it in its mode could empty or move "
                             "it); open it again after the restore" % _kb_file_desc(v))
            continue
        cls = type(v)
        if cls.__module__ == "__main__" and "." not in cls.__qualname__ and ns.get(cls.__qualname__) is not cls:
            skipped[name] = ("an instance of an earlier definition of class %s (the class was defined again since): "
                             "restored, it would become an instance of the new definition; create it again" % cls.__qualname__)
            continue
        try:
            kind, bufs, files = _kb_dump(out, v, dill_pickler)
        except Exception as e:  # one object that cannot be pickled does not sink the rest
            skipped[name] = _kb_why(e)
            continue
        if files:
            changed[name] = ("restored with the file objects it held as closed stand-ins (%s): a restore never "
                             "re-opens a file" % "; ".join(files[:5] + (["…"] if len(files) > 5 else [])))
        raws = [_kb_raw(b) for b in bufs]
        size = out.n + sum(r.nbytes for r in raws)
        total += size
        if limit > 0 and total > limit:
            big = sorted(((_kb_size(r), r["name"]) for r in records), reverse=True)[:5]
            return {"too_big": True, "bytes": total, "limit": limit, "name": name,
                    "largest": [[n, s] for s, n in big] + [[name, size]]}, None
        rec = {"name": name, "kind": kind, "len": out.n, "sum": out.sum, "bufs": []}
        for r in raws:
            rec["bufs"].append([r.nbytes, zlib.adler32(r)])
            f.write(r)
        names.append(name)
        records.append(rec)
    by_design = {}
    if caches:
        by_design[_KB_CACHES_KEY] = ("%d names (In, Out, _, __, ___, _i, _ii, _iii, _iN, _N, _ih, _oh, _dh) holding IPython's input and "
                                     "output history: not saved by design; a restored kernel's history starts "
                                     "afresh" % caches)
    index = {"format": _KB_FORMAT, "dill": dill.__version__, "python": sys.version.split()[0],
             "names": names, "records": records, "modules": modules, "skipped": skipped,
             "changed": changed, "by_design": by_design, "meta": meta}
    b = json.dumps(index).encode()
    off = f.tell()
    f.write(b)
    f.write(_KB_END + struct.pack(">IQQ", zlib.adler32(b), off, len(b)))
    return None, index


def _kb_size(rec):
    return rec["len"] + sum(n for n, _ in rec["bufs"])


def _kb_read(path):
    """Returns (header, [(kind, pickle, buffers)]) of a whole, checked snapshot, or
    raises ValueError."""
    with open(path, "rb") as f:
        magic = f.read(len(_KB_MAGIC))
        if magic == _KB_MAGIC_V1:
            f.seek(0)
            return _kb_read_v1(f.read())
        if magic != _KB_MAGIC:
            if magic.startswith(b"KBSNAP"):
                raise ValueError("the snapshot was written by another kernelbox snapshot format (%r); this one reads %r" % (magic, _KB_MAGIC))
            raise ValueError("the file is not a kernelbox snapshot (bad magic)")
        size = os.fstat(f.fileno()).st_size
        if size < len(_KB_MAGIC) + _KB_TRAILER:
            raise ValueError("the snapshot is truncated (%d bytes; no end marker)" % size)
        f.seek(size - _KB_TRAILER)
        tr = f.read(_KB_TRAILER)
        if tr[:5] != _KB_END:
            raise ValueError("the snapshot is truncated (%d bytes; no end marker)" % size)
        isum, ioff, ilen = struct.unpack(">IQQ", tr[5:])
        if ioff + ilen + _KB_TRAILER != size or ilen > _KB_MAX_INDEX or ioff < len(_KB_MAGIC):
            raise ValueError("the snapshot is corrupted (its end marker does not fit its size)")
        f.seek(ioff)
        raw = f.read(ilen)
        if zlib.adler32(raw) != isum:
            raise ValueError("the snapshot is corrupted (its index's checksum does not match)")
        header = json.loads(raw)
        if header.get("format") != _KB_FORMAT:
            raise ValueError("the snapshot has format %r; this kernelbox reads %r" % (header.get("format"), _KB_FORMAT))
        records = header["records"]
        if len(_KB_MAGIC) + sum(_kb_size(r) for r in records) != ioff:
            raise ValueError("the snapshot is corrupted (its records do not fill it)")
        f.seek(len(_KB_MAGIC))
        out = []
        for r in records:
            p = f.read(r["len"])
            if len(p) != r["len"] or zlib.adler32(p) != r["sum"]:
                raise ValueError("the snapshot is corrupted (the checksum of %r does not match)" % r["name"])
            bufs = []
            for n, want in r["bufs"]:
                b = bytearray(n)  # the restored array's own memory
                if f.readinto(b) != n or zlib.adler32(b) != want:
                    raise ValueError("the snapshot is corrupted (the checksum of %r does not match)" % r["name"])
                bufs.append(b)
            out.append((r["kind"], p, bufs))
        return header, out


def _kb_read_v1(data):
    """Reads format 1: one CRC-32 over the file, every pickle in band."""
    if len(data) < len(_KB_MAGIC_V1) + 8 + _KB_TRAILER_V1 or data[-_KB_TRAILER_V1:-12] != _KB_END:
        raise ValueError("the snapshot is truncated (%d bytes; no end marker)" % len(data))
    body = memoryview(data)[:-_KB_TRAILER_V1]  # slices of a memoryview copy nothing
    crc, n = struct.unpack(">IQ", data[-12:])
    if n != len(body) or zlib.crc32(body) != crc:
        raise ValueError("the snapshot is corrupted (its checksum does not match)")
    pos = len(_KB_MAGIC_V1)
    (n,) = struct.unpack_from(">Q", body, pos)
    pos += 8
    header = json.loads(bytes(body[pos:pos + n]))
    pos += n
    if header.get("format") != 1:
        raise ValueError("the snapshot has format %r; this kernelbox reads 1 and %r" % (header.get("format"), _KB_FORMAT))
    out = []
    for _ in header["names"]:
        (m,) = struct.unpack_from(">Q", body, pos)
        pos += 8
        b = body[pos:pos + m]
        out.append((bytes(b[:1]).decode(), b[1:], []))
        pos += m
    if pos != len(body):
        raise ValueError("the snapshot's records do not fill it")
    return header, out


def _kb_load(path):
    # A first line out: the load's request is silent, and this output shows
    # kernelbox that its code runs (an interrupt is safe from now on).
    sys.stdout.write("\x1ekernelbox-loading\n")
    sys.stdout.flush()
    _kb_sweep(path)
    try:
        import dill
    except ImportError as e:
        _kb_report({"lost": "python3-dill is not installed in the kernel (%s); rebuild the kernel image (kernelbox image build)" % e})
        return
    try:
        header, records = _kb_read(path)
    except FileNotFoundError:
        _kb_report({"lost": "the session's snapshot file is missing"})
        return
    except (ValueError, KeyError, TypeError, struct.error, OSError) as e:
        _kb_report({"lost": _kb_why(e)})
        return
    ns = get_ipython().user_ns
    import importlib
    restored, failed = [], dict(("%s" % k, "not saved: " + v) for k, v in header.get("skipped", {}).items())
    changed = header.get("changed") or {}
    for name, mod in sorted(header.get("modules", {}).items()):
        try:
            ns[name] = importlib.import_module(mod)
            restored.append(name)
        except Exception as e:
            failed[name] = "re-import of module %s failed: %s" % (mod, _kb_why(e))
    for name, (kind, p, bufs) in zip(header["names"], records):
        try:
            notes = []
            ns[name] = pickle.loads(p, buffers=bufs) if kind == "p" else _kb_dill_loads(dill, p, notes)
            restored.append(name)
            if name in changed:
                failed[name] = changed[name]
            elif notes:
                failed[name] = ("restored with the file objects it held as closed stand-ins (%s): a restore never "
                                "re-opens a file" % "; ".join(notes[:5]))
        except Exception as e:
            failed[name] = "could not be loaded: " + _kb_why(e)
    _kb_report({"ok": True, "restored": sorted(restored), "not_restored": failed, "bytes": os.path.getsize(path),
                "python": header.get("python"), "dill": header.get("dill"), "by_design": header.get("by_design") or {},
                "meta": header.get("meta")})
