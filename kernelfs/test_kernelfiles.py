"""Tests of kernelfiles.py (the files API's kernel side), run directly (no kernel)
with the standard library's unittest: `python3 -m unittest discover -s kernelfs`
(make pytest). The module is built as the backend installs it: kernelsync.py
with kernelfiles.py appended.
"""
import base64
import importlib.util
import os
import socket
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_kernelsync  # noqa: E402


def load():
    m = types.ModuleType("_kernelbox_sync_files_test")
    src = ""
    for name in ("kernelsync.py", "kernelfiles.py"):
        with open(os.path.join(HERE, name), encoding="utf-8") as f:
            src += f.read() + "\n"
    exec(compile(src, "kernelsync+kernelfiles", "exec"), m.__dict__)
    return m


sha = test_kernelsync.sha


class FilesTest(test_kernelsync.SyncTest):
    def setUp(self):
        super().setUp()
        self.m = load()
        self.setup_dir()
        self.outside = tempfile.TemporaryDirectory()
        self.secret = os.path.join(self.outside.name, "secret.txt")
        with open(self.secret, "w") as f:
            f.write("host secret")

    def tearDown(self):
        self.outside.cleanup()
        super().tearDown()

    def upload(self, rel, data, noover=False, chunks=1):
        ans = self.call("fput", {"rel": rel, "noover": noover})
        if "code" in ans:
            return ans
        step = max(1, len(data) // chunks)
        for off in range(0, len(data), step):
            self.call("wput", {"h": ans["h"], "off": off}, data[off:off + step])
        return self.call("fputend", {"h": ans["h"], "size": len(data), "sha": sha(data)})

    def download(self, rel):
        ans = self.call("fget", {"rel": rel})
        if "code" in ans:
            return ans
        size = ans["stat"][0]
        b64 = self.call("rread", {"h": ans["h"], "off": 0, "n": size})
        data = base64.b64decode(b64)
        end = self.call("rend", {"h": ans["h"], "size": size})
        self.assertEqual(sha(data), end["sha"])
        return data

    def leftovers(self):
        return sorted(n for _, _, fs in os.walk(self.dir) for n in fs if n.startswith(self.m.TMP))


class UploadTest(FilesTest):
    def test_round_trip_makes_parents(self):
        data = os.urandom(100000)
        ans = self.upload("inputs/a/b/c.bin", data, chunks=7)
        self.assertEqual(ans["size"], len(data))
        self.assertEqual(self.download("inputs/a/b/c.bin"), data)
        self.assertEqual(self.leftovers(), [])

    def test_answers_usage_and_replaced_size(self):
        self.write("inputs/x", b"12345")
        self.write("outputs/y", b"123")
        ans = self.call("fput", {"rel": "inputs/x"})
        self.assertEqual((ans["used"], ans["old"]), (8, 5))
        self.call("abort", {"h": ans["h"]})
        self.assertEqual(self.leftovers(), [])

    def test_no_overwrite(self):
        self.write("inputs/x", b"old")
        self.assertEqual(self.upload("inputs/x", b"new", noover=True)["code"], "exists")
        with open(self.path("inputs/x"), "rb") as f:
            self.assertEqual(f.read(), b"old")
        self.assertEqual(self.upload("inputs/fresh", b"new", noover=True)["size"], 3)

    def test_checksum_mismatch_leaves_nothing(self):
        ans = self.call("fput", {"rel": "inputs/x"})
        self.call("wput", {"h": ans["h"], "off": 0}, b"abc")
        end = self.call("fputend", {"h": ans["h"], "size": 3, "sha": sha(b"abd")})
        self.assertEqual(end["code"], "io")
        self.assertFalse(os.path.exists(self.path("inputs/x")))
        self.assertEqual(self.leftovers(), [])

    def test_a_planted_link_is_replaced_not_written_through(self):
        os.symlink(self.secret, self.path("link"))
        self.assertEqual(self.upload("link", b"mine")["size"], 4)
        self.assertFalse(os.path.islink(self.path("link")))
        with open(self.secret) as f:
            self.assertEqual(f.read(), "host secret")

    def test_directories_and_links_on_the_path(self):
        os.symlink(self.outside.name, self.path("linkdir"))
        self.write("plain", b"x")
        for rel, code in [("linkdir/new.txt", "invalid_path"), ("plain/x", "not_directory"),
                          ("outputs", "is_directory")]:
            self.assertEqual(self.upload(rel, b"no")["code"], code, rel)
        self.assertEqual(os.listdir(self.outside.name), ["secret.txt"])


class PathRulesTest(FilesTest):
    def test_bad_paths_are_refused_by_every_operation(self):
        bad = ["../x", "/etc/passwd", "a//b", "a/", "./a", "a/../b", "a\0b", "bad\udcffname",
               "n" * 256, "d/" * 2100 + "f", ".kb-tmp-x", "inputs/.kb-tmp-1-2", ".kernelbox-session", ""]
        for rel in bad:
            for op in ("fput", "fget", "frm"):
                ans = self.call(op, {"rel": rel})
                self.assertEqual(ans.get("code"), "invalid_path", (op, rel, ans))
        self.assertEqual(self.call("flist", {"rel": "../"})["code"], "invalid_path")
        self.assertTrue(os.path.exists(os.path.join(self.dir, self.m.MARK)))

    def test_replaced_session_directory_is_noticed(self):
        os.rename(self.dir, self.dir + "-moved")
        os.symlink(self.outside.name, self.dir)
        try:
            self.assertEqual(self.call("fget", {"rel": "secret.txt"})["code"], "io")
            self.assertEqual(self.call("flist", {"rel": ""})["code"], "io")
        finally:
            os.unlink(self.dir)
            os.rename(self.dir + "-moved", self.dir)


class DownloadTest(FilesTest):
    def test_special_files_and_links_are_not_opened(self):
        os.symlink(self.secret, self.path("link"))
        os.symlink(self.outside.name, self.path("linkdir"))
        os.mkfifo(self.path("fifo"))
        s = socket.socket(socket.AF_UNIX)
        self.addCleanup(s.close)
        s.bind(self.path("sock"))
        self.write("plain", b"x")
        cases = [("link", "invalid_path"), ("linkdir/secret.txt", "invalid_path"), ("fifo", "invalid_path"),
                 ("sock", "invalid_path"), ("outputs", "is_directory"), ("plain/x", "not_directory"),
                 ("missing", "not_found"), ("missing/x", "not_found")]
        for rel, code in cases:
            self.assertEqual(self.call("fget", {"rel": rel}).get("code"), code, rel)
        self.assertEqual(self.m._handles, {})


class ListRemoveTest(FilesTest):
    def test_list(self):
        self.write("inputs/b.txt", b"bb")
        self.write("inputs/a.txt", b"a")
        os.mkdir(self.path("inputs/sub"))
        os.symlink("/etc/passwd", self.path("inputs/l"))
        os.mkfifo(self.path("inputs/f"))
        self.write("inputs/" + self.m.TMP + "1-1", b"tmp")
        ans = self.call("flist", {"rel": "inputs"})
        names = [(e[0], e[1], e[2]) for e in ans["entries"]]
        self.assertEqual(names, [("a.txt", "file", 1), ("b.txt", "file", 2), ("f", "other", 0),
                                 ("l", "symlink", len("/etc/passwd")), ("sub", "dir", names[4][2])])
        self.assertFalse(ans["truncated"])
        top = [e[0] for e in self.call("flist", {"rel": ""})["entries"]]
        self.assertEqual(top, ["inputs", "outputs"])
        self.assertTrue(self.call("flist", {"rel": "inputs", "max": 2})["truncated"])
        self.assertEqual(self.call("flist", {"rel": "inputs/a.txt"})["code"], "not_directory")
        self.assertEqual(self.call("flist", {"rel": "nope"})["code"], "not_found")

    def test_remove(self):
        os.symlink(self.secret, self.path("link"))
        self.write("d/e/f", b"x")
        self.assertEqual(self.call("frm", {"rel": "link"}), {})
        self.assertTrue(os.path.exists(self.secret))
        self.assertEqual(self.call("frm", {"rel": "d"})["code"], "is_directory")
        os.symlink(self.outside.name, self.path("d/e/out"))
        self.assertEqual(self.call("frm", {"rel": "d", "recursive": True}), {})
        self.assertFalse(os.path.exists(self.path("d")))
        self.assertEqual(os.listdir(self.outside.name), ["secret.txt"])
        self.assertEqual(self.call("frm", {"rel": "d"})["code"], "not_found")


if __name__ == "__main__":
    unittest.main()
