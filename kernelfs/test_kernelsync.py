"""Tests of kernelsync.py's operations, run directly (no kernel) with the standard
library's unittest: `python3 -m unittest discover -s kernelfs`
(make pytest). test_ipykernel_pin.py covers what the module relies on in a kernel.
"""
import base64
import hashlib
import importlib.util
import json
import os
import socket
import stat
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    """A fresh copy of the module, as the backend installs it in each kernel."""
    spec = importlib.util.spec_from_file_location("_kernelbox_sync_test", os.path.join(HERE, "kernelsync.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


NONCE = "0123456789abcdef0123456789abcdef"


def sha(b):
    return hashlib.sha256(b).hexdigest()


class SyncTest(unittest.TestCase):
    def setUp(self):
        self.m = load()
        self.cwd = os.getcwd()
        self.tmp = tempfile.TemporaryDirectory()
        self.base = os.path.join(self.tmp.name, "base")
        self.seq = 0

    def tearDown(self):
        if self.m._state["beat"] is not None:
            self.m._state["beat"].set()
        if self.m._state["reaper"] is not None:
            self.m._state["reaper"].join(10)
        os.chdir(self.cwd)
        self.tmp.cleanup()

    def call(self, op, args, data=None):
        """Runs op as the host does, a payload as a literal; returns the decoded answer."""
        msg = {"op": op, "args": args}
        lit = None
        if data is not None:
            self.seq += 1
            msg["seq"] = self.seq
            lit = base64.b64encode(data).decode("ascii")
        enc = base64.b64encode(json.dumps(msg).encode("utf-8")).decode("ascii")
        text = repr(self.m.call(enc, lit))
        try:
            return json.loads(text)
        except ValueError:
            return text  # a raw answer (rread)

    def setup_dir(self, **extra):
        args = {"base": self.base, "sid": "s1", "nonce": NONCE, "known": ""}
        args.update(extra)
        ans = self.call("setup", args, b"")
        self.dir = ans["dir"]
        return ans

    def path(self, rel):
        return os.path.join(self.dir, *rel.split("/"))

    def write(self, rel, data):
        p = self.path(rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)

    def mark(self, d, age=0, text=None):
        """Gives d a marker whose heartbeat is age seconds old (text: its content)."""
        p = os.path.join(d, self.m.MARK)
        with open(p, "w") as f:
            f.write(json.dumps({"kernelbox": 1, "pid": 1, "time": 0}) if text is None else text)
        t = time.time() - age
        os.utime(p, (t, t))


class SetupTest(SyncTest):
    def test_setup_makes_and_enters_the_session_directory(self):
        ans = self.setup_dir()
        self.assertEqual(ans["dir"], os.path.join(self.base, "s1-" + NONCE))
        self.assertEqual(ans["cwd0"], self.cwd)
        self.assertTrue(ans["new"])
        self.assertTrue(ans["made"])
        self.assertEqual(stat.S_IMODE(os.lstat(ans["dir"]).st_mode), 0o700)
        self.assertEqual(sorted(os.listdir(ans["dir"])), [self.m.MARK, "inputs", "outputs"])
        self.assertIsNotNone(self.m._marked(ans["dir"]))
        self.assertFalse(ans["parent"], "no kernel: the payload came as a literal")
        self.assertTrue(os.path.isdir(self.path("inputs")))
        self.assertTrue(os.path.isdir(self.path("outputs")))
        self.assertEqual(os.getcwd(), ans["dir"])
        again = self.call("setup", {"base": self.base, "sid": "s1", "known": ans["dir"]}, b"")
        self.assertFalse(again["new"])

    def test_setup_sweeps_leftover_temporary_files(self):
        self.setup_dir()
        for name in (self.m.TMP + "1-2", self.m.UPLOAD + "x", "keep.txt"):
            self.write("inputs/" + name, b"x")
        self.m._state["dir"] = None  # a restarted kernel process
        ans = self.call("setup", {"base": self.base, "sid": "other", "nonce": "f" * 32, "known": self.dir}, b"")
        self.assertTrue(ans["new"])
        self.assertFalse(ans["made"])
        self.assertEqual(ans["dir"], self.dir, "a known directory is reused")
        self.assertEqual(os.listdir(self.path("inputs")), ["keep.txt"])

    def test_a_new_directory_is_never_an_existing_one(self):
        # Whoever made it first (an earlier incarnation, someone who guessed),
        # its files are not taken for the session's.
        d = os.path.join(self.base, "s1-" + NONCE)
        os.makedirs(os.path.join(d, "inputs"))
        with open(os.path.join(d, "inputs", "in.csv"), "w") as f:
            f.write("old")
        with self.assertRaisesRegex(self.m.SyncError, "exists already"):
            self.setup_dir()
        self.assertIsNone(self.m._state["dir"])
        self.assertEqual(os.listdir(os.path.join(d, "inputs")), ["in.csv"])

    def test_bad_names_are_refused(self):
        for sid, nonce in (("s1", ""), ("s1", "0123"), ("s1", NONCE.upper()), ("s1", "../" + NONCE[3:]),
                           ("", NONCE), ("a/b", NONCE), ("..", NONCE)):
            with self.assertRaisesRegex(self.m.SyncError, "bad session directory name"):
                self.setup_dir(sid=sid, nonce=nonce)
        self.assertFalse(os.path.exists(self.base))

    def test_a_reaped_known_directory_is_made_again_empty(self):
        self.setup_dir()
        self.write("inputs/in.csv", b"x")
        self.m.remove()
        ans = self.setup_dir(known=self.dir)
        self.assertTrue(ans["new"])
        self.assertTrue(ans["made"])
        self.assertEqual(os.listdir(self.path("inputs")), [])

    def test_remove_takes_the_directory_and_its_heartbeat(self):
        self.setup_dir(reap=0.8)
        beat = self.m._state["beat"]
        self.write("outputs/deep/o.txt", b"o")
        self.m.remove()
        self.assertEqual(os.listdir(self.base), [])
        self.assertEqual(os.getcwd(), self.cwd)
        self.assertTrue(beat.is_set())
        with self.assertRaises(self.m.NotSetUp):
            self.call("stat", {"rels": ["inputs/x"]})

    def test_heartbeat_keeps_an_idle_directory(self):
        self.setup_dir(reap=0.8)  # a beat every 0.2 s
        mark = os.path.join(self.dir, self.m.MARK)
        os.utime(mark, (time.time() - 100, time.time() - 100))
        deadline = time.time() + 5
        while os.stat(mark).st_mtime < time.time() - 50 and time.time() < deadline:
            time.sleep(0.05)
        self.assertGreater(os.stat(mark).st_mtime, time.time() - 50, "the heartbeat did not refresh the marker")
        self.assertEqual(self.m.reap(self.base, 0.8), [])
        self.assertTrue(os.path.isdir(self.dir))

    def test_setup_reaps_abandoned_siblings(self):
        old = os.path.join(self.base, "s1-" + "a" * 32)
        os.makedirs(os.path.join(old, "outputs"))
        self.mark(old, age=7200)
        ans = self.setup_dir()
        self.m._state["reaper"].join(10)
        self.assertEqual(sorted(os.listdir(self.base)), [os.path.basename(ans["dir"])])


    def test_operations_before_setup_say_not_set_up(self):
        for op, args in (("stat", {"rels": ["a"]}), ("probe", {"fp": "", "max": 10, "depth": 2, "inline": 10})):
            with self.assertRaises(self.m.NotSetUp):
                self.call(op, args)

    def test_unknown_operation(self):
        with self.assertRaisesRegex(self.m.SyncError, "unknown operation"):
            self.call("nope", {})


class PathTest(SyncTest):
    def test_escaping_paths_are_refused(self):
        self.setup_dir()
        for rel in ("", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a/", ".", "..", "a\0b"):
            with self.subTest(rel=rel):
                with self.assertRaisesRegex(self.m.SyncError, "bad path"):
                    self.call("wfile", {"rel": rel, "size": 1, "sha": sha(b"x"), "mode": 0o644}, b"x")
                with self.assertRaisesRegex(self.m.SyncError, "bad path"):
                    self.call("ropen", {"rel": rel})
        self.assertEqual(sorted(os.listdir(self.tmp.name)), ["base"], "nothing written outside")


class WriteTest(SyncTest):
    def test_whole_file_is_checked_and_moved_into_place(self):
        self.setup_dir()
        data = b"hello, kernel"
        ans = self.call("wfile", {"rel": "inputs/a.txt", "size": len(data), "sha": sha(data), "mode": 0o444}, data)
        self.assertEqual(ans["sha"], sha(data))
        self.assertEqual(ans["size"], len(data))
        with open(self.path("inputs/a.txt"), "rb") as f:
            self.assertEqual(f.read(), data)
        st = os.lstat(self.path("inputs/a.txt"))
        self.assertEqual(st.st_mode & 0o777, 0o444)
        self.assertEqual(ans["stat"], [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns])

    def test_checksum_mismatch_leaves_nothing(self):
        self.setup_dir()
        with self.assertRaisesRegex(self.m.SyncError, "checksum mismatch"):
            self.call("wfile", {"rel": "inputs/a.txt", "size": 3, "sha": sha(b"abd"), "mode": 0o644}, b"abc")
        self.assertEqual(os.listdir(self.path("inputs")), [])

    def test_chunks_out_of_order(self):
        self.setup_dir()
        data = os.urandom(10000)
        h = self.call("wbegin", {"rel": "data/sub/big.bin", "size": len(data), "mode": 0o644})["h"]
        for off in (6000, 0, 3000, 9000):
            end = min(len(data), off + 3000)
            self.assertEqual(self.call("wput", {"h": h, "off": off}, data[off:end])["n"], end - off)
        ans = self.call("wend", {"h": h, "sha": sha(data)})
        self.assertEqual(ans["sha"], sha(data))
        with open(self.path("data/sub/big.bin"), "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(os.listdir(self.path("data/sub")), ["big.bin"], "no temporary file left")

    def test_chunk_outside_the_file_and_bad_end_are_refused(self):
        self.setup_dir()
        h = self.call("wbegin", {"rel": "inputs/b.bin", "size": 4, "mode": 0o644})["h"]
        with self.assertRaisesRegex(self.m.SyncError, "outside the file"):
            self.call("wput", {"h": h, "off": 2}, b"xyz")
        self.call("wput", {"h": h, "off": 0}, b"abcd")
        with self.assertRaisesRegex(self.m.SyncError, "checksum mismatch"):
            self.call("wend", {"h": h, "sha": sha(b"abce")})
        self.assertEqual(os.listdir(self.path("inputs")), [], "the temporary file is discarded")
        with self.assertRaisesRegex(self.m.SyncError, "unknown transfer handle"):
            self.call("wput", {"h": h, "off": 0}, b"a")

    def test_abort_discards_the_temporary_file(self):
        self.setup_dir()
        h = self.call("wbegin", {"rel": "inputs/c.bin", "size": 4, "mode": 0o644})["h"]
        self.call("wput", {"h": h, "off": 0}, b"ab")
        self.assertEqual(self.call("abort", {"h": h}), {})
        self.assertEqual(os.listdir(self.path("inputs")), [])
        self.assertEqual(self.call("abort", {"h": h}), {}, "aborting twice is fine")

    def test_commit_checks_an_uploaded_file(self):
        self.setup_dir()
        self.write("inputs/kb-upload-1", b"uploaded")
        ans = self.call("commit", {"src": "inputs/kb-upload-1", "rel": "inputs/u.txt", "size": 8, "sha": sha(b"uploaded"), "mode": 0o644})
        self.assertEqual(ans["sha"], sha(b"uploaded"))
        self.write("inputs/kb-upload-2", b"tampered")
        with self.assertRaisesRegex(self.m.SyncError, "checksum mismatch"):
            self.call("commit", {"src": "inputs/kb-upload-2", "rel": "inputs/v.txt", "size": 8, "sha": sha(b"uploaded"), "mode": 0o644})
        self.assertEqual(os.listdir(self.path("inputs")), ["u.txt"])

    def test_payload_missing(self):
        self.setup_dir()
        enc = base64.b64encode(json.dumps({"op": "wfile", "seq": 99, "args": {"rel": "inputs/a", "size": 0, "sha": sha(b""), "mode": 0o644}}).encode()).decode()
        with self.assertRaisesRegex(self.m.SyncError, "no payload"):
            self.m.call(enc)


class PayloadRouteTest(SyncTest):
    def test_payload_from_the_request_being_handled(self):
        self.setup_dir()
        parent = {"content": {"kernelbox": {"seq": 7, "data": base64.b64encode(b"via parent").decode()}}}
        self.m._parent = lambda: parent
        enc = base64.b64encode(json.dumps({"op": "wfile", "seq": 7, "args": {"rel": "inputs/p.txt", "size": 10, "sha": sha(b"via parent"), "mode": 0o644}}).encode()).decode()
        self.assertEqual(json.loads(repr(self.m.call(enc)))["sha"], sha(b"via parent"))
        # A payload numbered for another operation is never taken.
        enc = base64.b64encode(json.dumps({"op": "wfile", "seq": 8, "args": {"rel": "inputs/q.txt", "size": 10, "sha": sha(b"via parent"), "mode": 0o644}}).encode()).decode()
        with self.assertRaisesRegex(self.m.SyncError, "no payload"):
            self.m.call(enc)

    def test_setup_reports_the_parent_route(self):
        self.m._parent = lambda: {"content": {"kernelbox": {"seq": 1, "data": ""}}}
        enc = base64.b64encode(json.dumps({"op": "setup", "seq": 1, "args": {"base": self.base, "sid": "s", "nonce": NONCE, "known": ""}}).encode()).decode()
        self.assertTrue(json.loads(repr(self.m.call(enc)))["parent"])

    def test_no_ipython_means_no_parent(self):
        self.assertEqual(self.m._parent(), {})


class ListTest(SyncTest):
    def probe(self, fp="", maxn=100, depth=3, inline=100):
        return self.call("probe", {"fp": fp, "max": maxn, "depth": depth, "inline": inline})

    def test_listing_skips_symlinks_and_special_files(self):
        self.setup_dir()
        self.write("outputs/a.txt", b"a")
        self.write("outputs/sub/b.txt", b"bb")
        os.symlink("/etc/passwd", self.path("outputs/link"))
        os.symlink(self.path("outputs/sub"), self.path("outputs/dirlink"))
        os.mkfifo(self.path("outputs/fifo"))
        sock = socket.socket(socket.AF_UNIX)
        self.addCleanup(sock.close)
        sock.bind(self.path("outputs/sock"))
        ans = self.probe()
        self.assertEqual([f[0] for f in ans["files"]], ["a.txt", "sub/b.txt"])
        self.assertEqual([f[1] for f in ans["files"]], [1, 2])
        self.assertEqual(ans["skipped"], [["dirlink", "symlink"], ["fifo", "not a regular file"], ["link", "symlink"], ["sock", "not a regular file"]])
        self.assertFalse(ans["truncated"])
        stat = self.call("stat", {"rels": ["outputs/a.txt", "outputs/link", "outputs/fifo", "outputs/none"]})
        self.assertEqual(stat["outputs/a.txt"][0], 1)
        self.assertEqual([stat[k] for k in ("outputs/link", "outputs/fifo", "outputs/none")], [None, None, None])
        sums = self.call("sums", {"rels": ["outputs/sub/b.txt", "outputs/link"]})
        self.assertEqual(sums, {"outputs/sub/b.txt": sha(b"bb"), "outputs/link": None})

    def test_outputs_symlink_is_not_followed(self):
        self.setup_dir()
        os.rmdir(self.path("outputs"))
        os.symlink(self.tmp.name, self.path("outputs"))
        ans = self.probe()
        self.assertEqual(ans["files"], [])
        self.assertEqual(ans["skipped"], [["", "outputs/ is a symlink"]])

    def test_depth_and_count_limits(self):
        self.setup_dir()
        self.write("outputs/d1/d2/d3/deep.txt", b"x")
        self.write("outputs/d1/ok.txt", b"x")
        ans = self.probe(depth=2)
        self.assertEqual([f[0] for f in ans["files"]], ["d1/ok.txt"])
        self.assertEqual(ans["skipped"], [["d1/d2/d3", "more than 2 levels deep"]])
        for i in range(5):
            self.write("outputs/many/f%d" % i, b"x")
        ans = self.probe(maxn=4)
        self.assertTrue(ans["truncated"])
        self.assertLessEqual(len(ans["files"]), 4)
        ans = self.probe(inline=2)
        self.assertTrue(ans["more"])
        self.assertNotIn("files", ans)

    def test_probe_unchanged_then_changed(self):
        self.setup_dir()
        self.write("outputs/a.txt", b"a")
        old = os.stat(self.path("outputs/a.txt")).st_mtime_ns - 10 * 10**9
        os.utime(self.path("outputs/a.txt"), ns=(old, old))
        first = self.probe()
        self.assertNotIn("-", first["fp"], "no recent file: the fingerprint is not salted")
        self.assertEqual(self.probe(fp=first["fp"]), {"same": True})
        unchanged = self.m.probe(first["fp"], 100, 3, 100)
        self.assertEqual(repr(unchanged), "0")
        self.assertTrue(hasattr(unchanged, "_ipython_display_"))
        self.write("outputs/b.txt", b"b")
        changed = json.loads(repr(self.m.probe(first["fp"], 100, 3, 100)))
        self.assertNotEqual(changed["fp"], first["fp"])
        self.assertEqual([f[0] for f in changed["files"]], ["a.txt", "b.txt"])
        self.assertIn("-", changed["fp"], "a recent file salts the fingerprint with the time")
        self.assertNotEqual(self.probe(fp=changed["fp"]).get("same"), True, "a salted fingerprint never matches")


class ReadTest(SyncTest):
    def test_read_many_within_a_budget(self):
        self.setup_dir()
        self.write("outputs/a", b"aaaa")
        self.write("outputs/b", b"b" * 100)
        os.symlink("/etc/passwd", self.path("outputs/l"))
        ans = self.call("rmany", {"rels": ["outputs/a", "outputs/b", "outputs/l", "outputs/none"], "budget": 50})["files"]
        self.assertEqual(ans[0]["rel"], "outputs/a")
        self.assertEqual(base64.b64decode(ans[0]["data"]), b"aaaa")
        self.assertEqual(ans[0]["sha"], sha(b"aaaa"))
        self.assertFalse(ans[0]["changed"])
        self.assertTrue(ans[1]["big"])
        self.assertIn("err", ans[2])
        self.assertIn("err", ans[3])

    def test_chunked_read(self):
        self.setup_dir()
        data = os.urandom(5000)
        self.write("outputs/big", data)
        op = self.call("ropen", {"rel": "outputs/big"})
        self.assertEqual(op["stat"][0], len(data))
        got = b""
        for off in range(0, len(data), 2048):
            got += base64.b64decode(self.call("rread", {"h": op["h"], "off": off, "n": 2048}))
        self.assertEqual(got, data)
        end = self.call("rend", {"h": op["h"], "size": len(data)})
        self.assertEqual(end["sha"], sha(data))
        self.assertFalse(end["changed"])
        with self.assertRaisesRegex(self.m.SyncError, "unknown transfer handle"):
            self.call("rend", {"h": op["h"], "size": len(data)})

    def test_special_files_are_not_opened(self):
        self.setup_dir()
        os.mkfifo(self.path("outputs/fifo"))
        with self.assertRaisesRegex(self.m.SyncError, "not a regular file"):
            self.call("ropen", {"rel": "outputs/fifo"})
        os.symlink("/etc/passwd", self.path("outputs/l"))
        with self.assertRaises(OSError):
            self.call("ropen", {"rel": "outputs/l"})


class ReapTest(SyncTest):
    """reap() removes only abandoned session directories: kernelbox's names, a
    valid marker, a heartbeat older than the bound (or a removal cut short)."""

    def entry(self, name, marker="ok", age=0, kind="dir"):
        d = os.path.join(self.base, name)
        if kind == "file":
            with open(d, "w") as f:
                f.write("x")
            return d
        os.makedirs(os.path.join(d, "outputs", "sub"))
        with open(os.path.join(d, "outputs", "sub", "o.txt"), "w") as f:
            f.write("o")
        if marker == "ok":
            self.mark(d, age)
        elif marker == "symlink":
            real = os.path.join(self.tmp.name, "real-mark-" + name)
            with open(real, "w") as f:
                f.write(json.dumps({"kernelbox": 1}))
            os.utime(real, (time.time() - age, time.time() - age))
            os.symlink(real, os.path.join(d, self.m.MARK))
        elif marker is not None:
            self.mark(d, age, text=marker)
        return d

    def test_rule(self):
        os.makedirs(self.base)
        hex32 = "0123456789abcdef" * 2
        cases = [
            # name, marker, heartbeat age (s), reaped
            ("stale-" + hex32, "ok", 7200, True),
            ("fresh-" + hex32, "ok", 10, False),
            ("nomark-" + hex32, None, 7200, False),
            ("badjson-" + hex32, "{not json", 7200, False),
            ("othermark-" + hex32, json.dumps({"kernelbox": 2}), 7200, False),
            ("listmark-" + hex32, "[1]", 7200, False),
            ("linkmark-" + hex32, "symlink", 7200, False),
            ("bigmark-" + hex32, json.dumps({"kernelbox": 1, "pad": "x" * 5000}), 7200, False),
            ("shortnonce-0123", "ok", 7200, False),
            ("UPPER-" + hex32.upper(), "ok", 7200, False),
            ("user-data", "ok", 7200, False),
            (".kb-trash-" + hex32, "ok", 0, True),  # a removal cut short, however recent
            (".kb-trash-" + "1" * 32, None, 0, False),
            ("keep-" + hex32, "ok", 7200, False),  # the caller's own
        ]
        for name, marker, age, _ in cases:
            self.entry(name, marker, age)
        self.entry("file-" + hex32, kind="file")
        target = self.entry("target-dir", "ok", 7200)
        os.symlink(target, os.path.join(self.base, "link-" + hex32))

        gone = self.m.reap(self.base, 3600, keep=os.path.join(self.base, "keep-" + hex32))
        self.assertEqual(sorted(gone), sorted(n for n, _, _, r in cases if r))
        left = set(os.listdir(self.base))
        for name, _, _, reaped in cases:
            self.assertEqual(name not in left, reaped, name)
        self.assertIn("file-" + hex32, left)
        self.assertIn("link-" + hex32, left)
        self.assertTrue(os.path.exists(os.path.join(target, "outputs", "sub", "o.txt")), "a link was followed")
        self.assertFalse([n for n in left if n.startswith(self.m.TRASH) and n != ".kb-trash-" + "1" * 32])

    def test_bound(self):
        os.makedirs(self.base)
        d = self.entry("s-" + "a" * 32, "ok", 100)
        self.assertEqual(self.m.reap(self.base, 101), [])
        self.assertEqual(self.m.reap(self.base, 99), ["s-" + "a" * 32])
        self.assertFalse(os.path.exists(d))

    def test_removal_cut_short_keeps_the_marker_to_the_end(self):
        # _remove_tree deletes the marker last: whatever stops it, what is left
        # still has the marker a later reap needs.
        os.makedirs(self.base)
        d = self.entry(".kb-trash-" + "b" * 32, "ok", 0)
        seen = []
        real_rmtree = self.m.shutil.rmtree

        def rmtree(p, **kw):
            seen.append(os.path.exists(os.path.join(d, self.m.MARK)))
            real_rmtree(p, **kw)

        self.m.shutil.rmtree = rmtree
        try:
            self.m.reap(self.base, 3600)
        finally:
            self.m.shutil.rmtree = real_rmtree
        self.assertEqual(seen, [True])
        self.assertEqual(os.listdir(self.base), [])


if __name__ == "__main__":
    unittest.main()
