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


class _KbPickler(pickle.Pickler):
    """The C pickler, refusing what it would save by a reference into __main__."""

    def reducer_override(self, obj):
        if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__":
            raise _KbNeedsDill()
        return NotImplemented


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


def _kb_dump(out, v, dill):
    """Pickles v into out; returns (kind, out-of-band buffers). On an exception the
    file is back where it was."""
    f, start = out.f, out.f.tell()

    def rewind():
        f.seek(start)
        f.truncate()
        out.reset()

    out.reset()
    bufs = []
    try:
        _KbPickler(out, protocol=5, buffer_callback=bufs.append).dump(v)
        return "p", bufs
    except Exception:  # _KbNeedsDill, or a type the C pickler cannot save
        rewind()
    try:
        dill.dump(v, out)  # functions keep the namespace as their globals
        return "d", []
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


def _kb_user_names(ip):
    ns, hidden = ip.user_ns, getattr(ip, "user_ns_hidden", {})
    out = []
    for name in list(ns):
        if name.startswith("__") or (name in hidden and ns[name] is hidden[name]):
            continue
        if name in ("In", "Out", "_", "__", "___", "exit", "quit", "get_ipython", "_oh", "_dh", "_ih", "_sh"):
            continue
        if name.startswith("_i") and (name[2:].isdigit() or name[2:] in ("", "i", "ii")):
            continue
        if name.startswith("_") and name[1:].isdigit():
            continue
        out.append(name)
    return sorted(out)


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


def _kb_save(path, limit):
    _kb_sweep(path)
    try:
        import dill
    except ImportError as e:
        _kb_report({"error": "python3-dill is not installed in the kernel (%s); rebuild the kernel image (kernelbox image build)" % e})
        return
    tmp = "%s.tmp-%d" % (path, os.getpid())
    try:
        with open(tmp, "wb") as f:
            r, index = _kb_write(f, get_ipython(), dill, limit)
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
                "skipped": index["skipped"]})


def _kb_write(f, ip, dill, limit):
    """Writes the namespace to f (format 2). Returns (a too_big report, None) or
    (None, the index written)."""
    ns = ip.user_ns
    names, records, modules, skipped, total = [], [], {}, {}, 0
    f.write(_KB_MAGIC)
    out = _KbOut(f)
    for name in _kb_user_names(ip):
        v = ns[name]
        if isinstance(v, types.ModuleType):
            modules[name] = v.__name__
            continue
        try:
            kind, bufs = _kb_dump(out, v, dill)
        except Exception as e:  # one object that cannot be pickled does not sink the rest
            skipped[name] = _kb_why(e)
            continue
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
    index = {"format": _KB_FORMAT, "dill": dill.__version__, "python": sys.version.split()[0],
             "names": names, "records": records, "modules": modules, "skipped": skipped}
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
    for name, mod in sorted(header.get("modules", {}).items()):
        try:
            ns[name] = importlib.import_module(mod)
            restored.append(name)
        except Exception as e:
            failed[name] = "re-import of module %s failed: %s" % (mod, _kb_why(e))
    for name, (kind, p, bufs) in zip(header["names"], records):
        try:
            ns[name] = pickle.loads(p, buffers=bufs) if kind == "p" else dill.loads(p)
            restored.append(name)
        except Exception as e:
            failed[name] = "could not be loaded: " + _kb_why(e)
    _kb_report({"ok": True, "restored": sorted(restored), "not_restored": failed, "bytes": os.path.getsize(path),
                "python": header.get("python"), "dill": header.get("dill")})
