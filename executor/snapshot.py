# kernelbox's namespace snapshot, run INSIDE a session's own kernel (never on the
# host, never in kernelbox's process: unpickling runs code). The executor sends this
# file's text followed by one call, _kb_save(...) or _kb_load(...), in a private
# globals dict, so nothing here lands in the user's namespace; the call prints one
# line "\x1ekernelbox-snapshot <json>" that the executor reads.
#
# File format (version 1), all integers big-endian:
#   b"KBSNAP1\n"                     magic and format version
#   u64 header length, header JSON   {"format":1,"dill":..,"python":..,"names":[..],
#                                     "modules":{name:module},"skipped":{name:why}}
#   per name in header["names"]: u64 length, one kind byte (b"p": the C pickle,
#   b"d": dill), the pickle
#   b"KBEND" + u32 CRC-32 of every byte before it + u64 that length
# A value is pickled by the C pickler when it can be (fast: a NumPy array or a
# DataFrame); one that needs anything defined in the session itself (a function,
# a lambda, a class, an instance of such a class) or that the C pickler refuses
# goes to dill, which pickles those by value.
# It is written to a temporary name beside the final one, fsynced and renamed, so a
# crash never leaves a half file under the final name; the trailer's hash catches a
# truncated or corrupted file before anything in it is unpickled (it is no defence
# against a deliberate edit: the session's own code can write the file, and a
# snapshot is only ever loaded in that session's kernel).
import io, json, os, pickle, struct, sys, types, zlib

_KB_MAGIC = b"KBSNAP1\n"
_KB_END = b"KBEND"
_KB_FORMAT = 1
_KB_TRAILER = 5 + 4 + 8


class _KbNeedsDill(Exception):
    pass


class _KbPickler(pickle.Pickler):
    """The C pickler, refusing what it would save by a reference into __main__."""

    def reducer_override(self, obj):
        if isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__":
            raise _KbNeedsDill()
        return NotImplemented


def _kb_dumps(v, dill):
    try:
        f = io.BytesIO()
        f.write(b"p")
        _KbPickler(f, protocol=5).dump(v)
        return f.getvalue()
    except Exception:  # _KbNeedsDill, or a type the C pickler cannot save
        return b"d" + dill.dumps(v)  # functions keep the namespace as their globals


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


def _kb_save(path, limit):
    try:
        import dill
    except ImportError as e:
        _kb_report({"error": "python3-dill is not installed in the kernel (%s); rebuild the kernel image (kernelbox image build)" % e})
        return
    ip = get_ipython()
    ns = ip.user_ns
    names, modules, skipped, blobs, total = [], {}, {}, [], 0
    for name in _kb_user_names(ip):
        v = ns[name]
        if isinstance(v, types.ModuleType):
            modules[name] = v.__name__
            continue
        try:
            b = _kb_dumps(v, dill)
        except Exception as e:  # one object that cannot be pickled does not sink the rest
            skipped[name] = _kb_why(e)
            continue
        total += len(b) + 8
        if limit > 0 and total > limit:
            big = sorted(((len(x), n) for n, x in zip(names, blobs)), reverse=True)[:5]
            _kb_report({"too_big": True, "bytes": total, "limit": limit, "name": name,
                        "largest": [[n, s] for s, n in big] + [[name, len(b)]]})
            return
        names.append(name)
        blobs.append(b)
    header = json.dumps({"format": _KB_FORMAT, "dill": dill.__version__, "python": sys.version.split()[0],
                         "names": names, "modules": modules, "skipped": skipped}).encode()
    tmp = "%s.tmp-%d" % (path, os.getpid())
    crc, n = 0, 0
    try:
        with open(tmp, "wb") as f:
            def put(b):
                nonlocal crc, n
                crc = zlib.crc32(b, crc)
                n += len(b)
                f.write(b)
            put(_KB_MAGIC)
            put(struct.pack(">Q", len(header)))
            put(header)
            for b in blobs:
                put(struct.pack(">Q", len(b)))
                put(b)
            f.write(_KB_END + struct.pack(">IQ", crc, n))
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
    _kb_report({"ok": True, "bytes": size, "names": names, "modules": modules, "skipped": skipped})


def _kb_read(path):
    """Returns (header, blobs) of a whole, checked snapshot, or raises ValueError."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(_KB_MAGIC):
        if data.startswith(b"KBSNAP"):
            raise ValueError("the snapshot was written by another kernelbox snapshot format (%r); this one reads %r" % (data[:8], _KB_MAGIC))
        raise ValueError("the file is not a kernelbox snapshot (bad magic)")
    if len(data) < len(_KB_MAGIC) + 8 + _KB_TRAILER or data[-_KB_TRAILER:-12] != _KB_END:
        raise ValueError("the snapshot is truncated (%d bytes; no end marker)" % len(data))
    body = memoryview(data)[:-_KB_TRAILER]  # slices of a memoryview copy nothing
    crc, n = struct.unpack(">IQ", data[-12:])
    if n != len(body) or zlib.crc32(body) != crc:
        raise ValueError("the snapshot is corrupted (its checksum does not match)")
    pos = len(_KB_MAGIC)
    (n,) = struct.unpack_from(">Q", body, pos)
    pos += 8
    header = json.loads(bytes(body[pos:pos + n]))
    pos += n
    if header.get("format") != _KB_FORMAT:
        raise ValueError("the snapshot has format %r; this kernelbox reads %r" % (header.get("format"), _KB_FORMAT))
    blobs = []
    for _ in header["names"]:
        (m,) = struct.unpack_from(">Q", body, pos)
        pos += 8
        blobs.append(body[pos:pos + m])
        pos += m
    if pos != len(body):
        raise ValueError("the snapshot's records do not fill it")
    return header, blobs


def _kb_load(path):
    try:
        import dill
    except ImportError as e:
        _kb_report({"lost": "python3-dill is not installed in the kernel (%s); rebuild the kernel image (kernelbox image build)" % e})
        return
    try:
        header, blobs = _kb_read(path)
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
    for name, b in zip(header["names"], blobs):
        try:
            ns[name] = pickle.loads(b[1:]) if b[:1] == b"p" else dill.loads(b[1:])
            restored.append(name)
        except Exception as e:
            failed[name] = "could not be loaded: " + _kb_why(e)
    _kb_report({"ok": True, "restored": sorted(restored), "not_restored": failed, "bytes": os.path.getsize(path),
                "python": header.get("python"), "dill": header.get("dill")})
