"""KernelboxSandbox answers as Deep Agents' own BaseSandbox does (deepagents 0.7.8,
``deepagents/backends/sandbox.py``): the same fields, error codes and wording, for
the cases its documentation names. Written from that documented behaviour; deepagents
itself cannot be installed here. Each case runs in the session directory (files API)
and in /tmp (through the kernel), on local, and on docker when it is there.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.request
from unittest import mock

import kbserve
from kbserve import Serve

from kernelbox.deepagents import KernelboxSandbox, KernelboxSandboxClient
from kernelbox.deepagents._files import EMPTY_FILE, TRUNCATION_MSG

SERVERS = {}


def setUpModule():
    kbserve.require_jupyter()
    SERVERS["local"] = Serve().start()


def tearDownModule():
    for s in SERVERS.values():
        s.cleanup()


class Parity(kbserve.TimedTest):
    """The cases; subclasses say which server."""

    backend = "local"
    sb: KernelboxSandbox

    @classmethod
    def setUpClass(cls):
        cls.sb = KernelboxSandbox(SERVERS[cls.backend].url, token="")
        cls.bases = [cls.sb.root + "/par", "/tmp/kbpy-par-" + secrets.token_hex(4)]

    @classmethod
    def tearDownClass(cls):
        cls.sb.execute("rm -rf " + cls.bases[1])
        cls.sb.close()

    def each(self):
        for b in self.bases:
            with self.subTest(base=b):
                self.sb.delete(b)
                yield b

    def put(self, path, data):
        self.assertEqual(self.sb.upload_files([(path, data)])[0].error, None)

    def test_read(self):
        sb = self.sb
        for b in self.each():
            self.put(b + "/empty.txt", b"")
            r = sb.read(b + "/empty.txt")
            self.assertEqual((r.error, r.file_data), (None, {"content": EMPTY_FILE, "encoding": "utf-8"}))
            self.assertEqual((r.start_line, r.total_lines, r.no_lines_requested), (None, None, False))
            self.assertEqual(sb.read(b + "/empty.txt", limit=0).file_data["content"], EMPTY_FILE,
                             "the empty-file reminder comes before the zero-limit answer")
            self.assertEqual(sb.read(b + "/missing.txt").error, f"File '{b}/missing.txt': file_not_found")
            self.assertEqual(sb.read(b).error, f"File '{b}': not_a_file")
            self.put(b + "/t.txt", "a\r\nb\r\nü ✓\n".encode())
            r = sb.read(b + "/t.txt")
            self.assertEqual(r.file_data, {"content": "a\nb\nü ✓", "encoding": "utf-8"})
            self.assertEqual((r.start_line, r.end_line, r.total_lines, r.next_offset), (1, 3, 3, None))
            r = sb.read(b + "/t.txt", offset=-5, limit=1)
            self.assertEqual((r.file_data["content"], r.start_line, r.end_line, r.next_offset), ("a", 1, 1, 1))
            r = sb.read(b + "/t.txt", limit=-1)
            self.assertEqual((r.file_data["content"], r.no_lines_requested, r.start_line), ("", True, None))
            self.assertEqual(sb.read(b + "/t.txt", offset=10).error,
                             f"File '{b}/t.txt': Line offset 10 exceeds file length (3 lines)")
            raw = bytes(range(256))
            self.put(b + "/blob.bin", raw)
            r = sb.read(b + "/blob.bin", offset=3, limit=1)
            self.assertEqual((r.file_data["encoding"], base64.b64decode(r.file_data["content"])), ("base64", raw))
            self.assertIsNone(r.start_line, "binary files come whole, without a window")
            self.put(b + "/pic.png", b"not really a png, but text")
            self.assertEqual(sb.read(b + "/pic.png").file_data["encoding"], "base64", "by extension")
            self.put(b + "/long.txt", b"x" * 600_000 + b"\nsecond\n")
            r = sb.read(b + "/long.txt")
            self.assertTrue(r.file_data["content"].endswith(TRUNCATION_MSG))
            self.assertEqual(len(r.file_data["content"].encode()), 500 * 1024)
            self.assertEqual((r.start_line, r.end_line, r.total_lines, r.next_offset), (1, 1, 2, 1))
            self.assertEqual(sb.read(b + "/long.txt", offset=1).file_data["content"], "second")

    def test_edit(self):
        sb = self.sb
        for b in self.each():
            p = b + "/e.txt"
            self.put(p, b"one two two\r\nthree\r\n")
            self.assertEqual(sb.edit(b + "/nope.txt", "a", "b").error, f"Error: File '{b}/nope.txt' not found")
            self.assertEqual(sb.edit(p, "two", "2").error, "Error: String 'two' appears multiple times. "
                                                             "Use replace_all=True to replace all occurrences.")
            self.assertEqual(sb.edit(p, "zzz", "2").error, "Error: String not found in file: 'zzz'")
            self.assertEqual(sb.edit(b, "a", "b").error, f"Error: '{b}' is not a regular file")
            e = sb.edit(p, "two\nthree", "2\n3")  # LF as read gives it, against a CRLF file
            self.assertEqual((e.error, e.path, e.occurrences), (None, p, 1))
            self.assertEqual(sb.download_files([p])[0].content, b"one two 2\r\n3\r\n", "the file keeps CRLF")
            e = sb.edit(p, "o", "0", replace_all=True)
            self.assertEqual(e.occurrences, 2)
            self.put(b + "/bin.dat", b"\xff\xfe\x00")
            self.assertEqual(sb.edit(b + "/bin.dat", "a", "b").error, f"Error: File '{b}/bin.dat' is not a text file")

    def test_ls(self):
        sb = self.sb
        for b in self.each():
            self.put(b + "/.hidden", b"h")
            self.put(b + "/d/f.txt", b"f")
            r = sb.ls(b)
            self.assertEqual([(e["path"], e["is_dir"]) for e in r.entries], [(b + "/.hidden", False), (b + "/d", True)])
            self.assertEqual(sorted(r.entries[0]), ["is_dir", "modified_at", "path", "size"])
            self.assertEqual(sb.ls(b + "/").entries[1]["path"], b + "/d")
            self.assertEqual(sb.ls(b + "/none").error, f"Path '{b}/none': path_not_found")
            self.assertIsNone(sb.ls(b + "/none").entries)
            self.assertEqual(sb.ls(b + "/d/f.txt").error, f"Path '{b}/d/f.txt': not_a_directory")

    def test_glob(self):
        sb = self.sb
        for b in self.each():
            for f in ("a.py", "b.txt", "c.txt", ".hid.py", "sub/x.py", "sub/deep/y.py", ".git/z.py", "sub/.h/w.py",
                      "ab.md"):
                self.put(f"{b}/{f}", b"x")

            def g(pattern, path=b):
                r = sb.glob(pattern, path)
                self.assertIsNone(r.error, pattern)
                self.assertTrue(all(m["is_dir"] is False for m in r.matches))
                return [m["path"][len(b) + 1:] for m in r.matches]

            self.assertEqual(g("*.py"), [".git/z.py", "a.py", "sub/.h/w.py", "sub/deep/y.py", "sub/x.py"],
                             "no slash: the base name at any depth, hidden directories too, hidden names not")
            self.assertEqual(g(".*.py"), [".hid.py"])
            self.assertEqual(g("**/*.py"), ["a.py", "sub/deep/y.py", "sub/x.py"], "** crosses no hidden directory")
            self.assertEqual(g("/*.py"), ["a.py"], "a leading slash anchors at the searched directory")
            self.assertEqual(g("[bc].txt"), ["b.txt", "c.txt"])
            self.assertEqual(g("[!b].txt"), ["c.txt"])
            self.assertEqual(g("[^b].txt"), ["c.txt"], "^ negates as in bash and ripgrep")
            self.assertEqual(g("{a,b}.*"), ["a.py", "b.txt"])
            self.assertEqual(g("sub/**"), ["sub/deep/y.py", "sub/x.py"])
            self.assertEqual(g("sub/"), [], "a trailing slash asks for directories: never returned")
            self.assertEqual(g("?b.md"), ["ab.md"])
            self.assertEqual(sb.glob("../*", b).error, f"Path '{b}': invalid_pattern")
            self.assertEqual(sb.glob("*", b + "/no").error, f"Path '{b}/no': path_not_found")
            self.assertEqual(sb.glob("{a,b,c,d,e,f,g,h,i,j,k}" * 3, b).error, f"Path '{b}': pattern_too_broad")

    def test_grep_write_delete(self):
        sb = self.sb
        for b in self.each():
            self.put(b + "/a.py", b"x = 1  # str | int\nprint('$(x)')\n")
            self.put(b + "/sub/b.txt", b"str | int\n")
            self.put(b + "/sub/bin", b"\xffstr | int\n")
            m = sb.grep("str | int", b).matches
            self.assertEqual([(x["path"], x["line"], x["text"]) for x in m],
                             [(b + "/a.py", 1, "x = 1  # str | int"), (b + "/sub/b.txt", 1, "str | int")])
            self.assertEqual([x["path"] for x in sb.grep("str", b, glob="*.txt").matches], [b + "/sub/b.txt"])
            self.assertEqual([x["path"] for x in sb.grep("str", b, glob="sub/*.txt").matches], [b + "/sub/b.txt"])
            self.assertEqual([x["path"] for x in sb.grep("$(x)", b + "/a.py").matches], [b + "/a.py"])
            g = sb.grep("str", b, max_count=1)
            self.assertEqual((len(g.matches), g.truncated), (1, True))
            self.assertEqual(sb.write(b, "x").error, f"Failed to write file '{b}': is_directory")
            self.assertEqual(sb.delete(b + "/nothing").error, f"Error: '{b}/nothing' not found")
            self.assertEqual(sb.delete(b + "/sub").path, b + "/sub")

    def test_async_twins_agree(self):
        sb, b = self.sb, self.bases[1]
        sb.write(b + "/as.txt", "q\n")

        async def go():
            return await asyncio.gather(sb.aread(b + "/as.txt"), sb.als(b), sb.aglob("*.txt", b),
                                        sb.agrep("q", b), sb.aedit(b + "/as.txt", "zz", "y"))

        r, ls, gl, gr, ed = asyncio.run(go())
        self.assertEqual(r.file_data["content"], "q")
        self.assertIn(b + "/as.txt", [e["path"] for e in ls.entries])
        self.assertEqual([m["path"] for m in gl.matches], [b + "/as.txt"])
        self.assertEqual(gr.matches[0]["line"], 1)
        self.assertEqual(ed.error, "Error: String not found in file: 'zz'")


class BadInput(kbserve.TimedTest):
    """Paths and names an injected agent would try; nothing reaches a shell."""

    @classmethod
    def setUpClass(cls):
        cls.sb = KernelboxSandbox(SERVERS["local"].url, token="")

    @classmethod
    def tearDownClass(cls):
        cls.sb.close()

    def test_paths_refused(self):
        sb, root = self.sb, self.sb.root
        for p in (root + "/../x", "/tmp/a\x00b", "~/x", "rel/x.txt", "", root + "/a/../../b"):
            with self.subTest(path=p):
                self.assertEqual(sb.read(p).error, f"File '{p}': invalid_path")
                self.assertEqual(sb.write(p, "x").error, f"Failed to write file '{p}': invalid_path")
                self.assertEqual(sb.edit(p, "a", "b").error, f"Error editing file '{p}': invalid_path")
                self.assertEqual(sb.ls(p).error, f"Path '{p}': invalid_path")
                self.assertEqual(sb.delete(p).error, f"Error deleting file '{p}': invalid_path")
                self.assertEqual(sb.download_files([p])[0].error, "invalid_path")

    def test_shell_characters_in_names_and_patterns(self):
        sb, root = self.sb, self.sb.root
        canary = "kbpy-pwned-" + secrets.token_hex(4)  # a shell running a name would touch it in its cwd
        names = ["q'uo\"te.txt", f"$(touch {canary})", f"`touch {canary}`", "new\nline.txt", "gl*ob?[x].txt",
                 f"; touch {canary}", "ü ✓.txt"]
        for base in (root + "/odd", "/tmp/kbpy-odd-" + secrets.token_hex(4)):
            self.addCleanup(sb.delete, base)
            for k, n in enumerate(names):
                with self.subTest(base=base, name=n):
                    p = base + "/" + n
                    self.assertIsNone(sb.write(p, f"content {k}\n").error)
                    self.assertEqual(sb.read(p).file_data["content"], f"content {k}")
                    self.assertIsNone(sb.edit(p, "content", "body").error)
                    self.assertEqual([m["path"] for m in sb.grep(f"body {k}", base).matches], [p])
                    esc = n.replace("[", "[[]").replace("*", "[*]").replace("?", "[?]")
                    self.assertEqual([m["path"] for m in sb.glob(esc, base).matches], [p])
                    self.assertEqual(sb.delete(p + "x").error, f"Error: '{p}x' not found")
            self.assertEqual(len(sb.ls(base).entries), len(names))
            self.assertEqual(sb.grep(f"$(touch {canary})", base, glob=f"`touch {canary}`").matches, [])
        for d in (root, SERVERS["local"].dir, os.getcwd()):
            self.assertFalse(os.path.exists(os.path.join(d, canary)), "a name was run by a shell")
        self.assertEqual(sb.execute(f"ls {canary}").exit_code, 2)

    def test_symlink_out_of_tmp(self):
        sb, root = self.sb, self.sb.root
        d = "/tmp/kbpy-link-" + secrets.token_hex(4)
        self.addCleanup(sb.execute, f"rm -rf {d} {root}/ln")
        sb.execute(f"mkdir -p {d} && ln -s /etc {d}/etc && ln -s /etc {root}/ln")
        self.assertEqual(sb.glob("**/passwd", d).matches, [], "glob does not follow a link out")
        self.assertEqual(sb.grep("root", d).matches, [], "grep does not follow a link out")
        self.assertEqual([(e["path"], e["is_dir"]) for e in sb.ls(d).entries], [(d + "/etc", False)])
        self.assertEqual(sb.download_files([root + "/ln/passwd"])[0].error, "invalid_path",
                         "the files API refuses a link in the session directory")
        self.assertEqual(sb.ls(root + "/ln").error, f"Path '{root}/ln': invalid_path")

    def test_big_pattern_and_big_file(self):
        sb = self.sb
        d = "/tmp/kbpy-big-" + secrets.token_hex(4)
        self.addCleanup(sb.execute, f"rm -rf {d}")
        sb.write(d + "/small.txt", "abc\n")
        big = "y" * (1 << 20)
        for base in (d, sb.root):
            r = sb.grep(big, base)
            self.assertEqual((r.error, r.matches), (None, []))
        sb.write(d + "/hit.txt", "<" + big + ">\n")
        self.assertEqual([m["path"] for m in sb.grep(big, d).matches], [d + "/hit.txt"], "a 1 MB pattern is found")
        r = sb.execute("echo " + big + " | wc -c")  # reaches the kernel; Linux refuses a 1 MB argument
        self.assertEqual(r.exit_code, None)
        self.assertIn("Argument list too long", r.output)
        # 100 MB: a million lines of 100 digits (seq writes it in well under a second).
        r = sb.execute(f"seq -f '%0100.0f' 0 999999 > {d}/big.txt && stat -c %s {d}/big.txt", timeout=120)
        self.assertEqual(r.exit_code, 0, r.output)
        self.assertEqual(int(r.output), 101_000_000)
        r = sb.read(d + "/big.txt", offset=900_000, limit=2)
        self.assertEqual(r.file_data["content"], "%0100d\n%0100d" % (900_000, 900_001))
        self.assertEqual((r.start_line, r.end_line, r.next_offset, r.total_lines), (900_001, 900_002, 900_002, None))


class ServerRootTest(kbserve.TimedTest):
    """Issue 47 item 3: the session directory comes from the server, not the kernel's cwd."""

    def test_chdir_in_the_kernel_then_reconnect(self):
        pc = KernelboxSandboxClient(SERVERS["local"].url, token="")
        sb = pc.create()
        self.addCleanup(pc.delete, sandbox_id=sb.id)
        root = sb.root
        self.assertEqual(pc.client.session(sb.id).dir, root)
        sb.write(root + "/notes.txt", "top")
        sb.write(root + "/sub/notes.txt", "sub")
        self.assertEqual(sb.run_python("import os; os.chdir('sub'); os.getcwd()").status, "ok")
        again = pc.get(sandbox_id=sb.id)
        self.assertEqual(again.root, root)
        self.assertIsNone(again.write(root + "/sub/a.py", "x = 1\n").error)
        self.assertEqual(sorted(os.path.basename(e["path"]) for e in again.ls(root + "/sub").entries),
                         ["a.py", "notes.txt"])
        self.assertIsNone(again.delete(root + "/sub/notes.txt").error)
        self.assertEqual(again.read(root + "/notes.txt").file_data["content"], "top", "the wrong notes.txt went")
        self.assertEqual(again.execute("pwd").output.strip(), root, "commands run in the session directory")
        self.assertTrue(again.run_python("os.getcwd()").result.endswith("/sub'"), "the kernel's cwd is left alone")


class RemoteTest(kbserve.TimedTest):
    """On the remote backend the server names no session directory: every path goes
    through the kernel, absolute, so a chdir in the kernel moves nothing either."""

    def test_paths_through_the_kernel(self):
        port = kbserve.free_port()
        jdir = tempfile.mkdtemp(prefix="kbpy-jsrv-")
        self.addCleanup(shutil.rmtree, jdir, True)
        env = dict(os.environ, JUPYTER_TOKEN="jt-remote", JUPYTER_RUNTIME_DIR=jdir + "/rt",
                   JUPYTER_DATA_DIR=jdir + "/data", JUPYTER_CONFIG_DIR=jdir + "/cfg")
        args = [kbserve.JUPYTER_PYTHON, "-m", "jupyter_server", "--no-browser", "--ip=127.0.0.1",
                f"--port={port}", f"--ServerApp.root_dir={jdir}"] + (["--allow-root"] if os.getuid() == 0 else [])
        js = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=jdir)
        self.addCleanup(lambda: (js.terminate(), js.wait(30)))
        deadline = time.monotonic() + 90
        while True:  # the gateway must answer before serve starts
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=2):
                    break
            except OSError:
                self.assertLess(time.monotonic(), deadline, "jupyter_server did not start")
                self.assertIsNone(js.poll(), "jupyter_server exited")
                time.sleep(0.2)
        srv = Serve(backend="remote", extra=["--gateway", f"http://127.0.0.1:{port}"])
        self.addCleanup(srv.cleanup)  # before start: a serve that fails to start leaves nothing
        with mock.patch.dict(os.environ, {"KERNELBOX_GATEWAY_TOKEN": "jt-remote"}):
            srv.start(wait=120)
        sb = KernelboxSandbox(srv.url, token="")
        self.addCleanup(sb.close)
        with self.assertRaises(RuntimeError):
            sb.root
        self.assertEqual(srv.client().session(sb.id).dir, "")
        d = "/tmp/kbpy-remote-" + secrets.token_hex(4)
        self.addCleanup(sb.execute, "rm -rf " + d)
        self.assertIsNone(sb.write(d + "/notes.txt", "top").error)
        self.assertEqual(sb.run_python(f"import os; os.makedirs('{d}/sub'); os.chdir('{d}/sub')").status, "ok")
        self.assertIsNone(sb.write(d + "/a.py", "x = 1\n").error)
        self.assertEqual(sorted(os.path.basename(e["path"]) for e in sb.ls(d).entries), ["a.py", "notes.txt", "sub"])
        self.assertEqual(sb.read(d + "/notes.txt").file_data["content"], "top")
        self.assertEqual([m["path"] for m in sb.glob("*.py", d).matches], [d + "/a.py"])
        self.assertIsNone(sb.delete(d + "/notes.txt").error)
        self.assertEqual(sb.read(d + "/notes.txt").error, f"File '{d}/notes.txt': file_not_found")
        blob = os.urandom(400_000)  # three pieces through the cells, no staging directory
        self.assertEqual([u.error for u in sb.upload_files([(d + "/blob.bin", blob), (d, b"x")])],
                         [None, "is_directory"])
        got = sb.download_files([d + "/blob.bin", d + "/none", d])
        self.assertEqual([(g.content, g.error) for g in got],
                         [(blob, None), (None, "file_not_found"), (None, "is_directory")])


class DockerParity(Parity):
    backend = "docker"

    @classmethod
    def setUpClass(cls):
        if not kbserve.docker_ready():
            raise unittest.SkipTest("no Docker daemon or no kernelbox/kernel:latest image")
        if "docker" not in SERVERS:
            SERVERS["docker"] = Serve(backend="docker").start()
        super().setUpClass()
        assert cls.sb.root == "/workspace", cls.sb.root


if __name__ == "__main__":
    unittest.main()
