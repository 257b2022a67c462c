"""kernelbox.deepagents and kernelbox.tools against a real serve (local; docker when there)."""

from __future__ import annotations

import asyncio
import os
import time
import unittest

import kbserve
from kbserve import Serve

import kernelbox
from kernelbox import tools
from kernelbox.deepagents import KernelboxSandbox, KernelboxSandboxClient, SandboxNotFoundError

S: Serve


def setUpModule():
    global S
    kbserve.require_jupyter()
    # As root a session disk of 8 MiB makes the quota reachable (otherwise it is only enforced after calls).
    quota = ["--disk-quota", "8MiB"] if os.getuid() == 0 else []
    S = Serve(extra=quota).start()


def tearDownModule():
    if globals().get("S"):
        S.cleanup()


class SandboxTest(kbserve.TimedTest):
    sb: KernelboxSandbox

    @classmethod
    def setUpClass(cls):
        cls.sb = KernelboxSandbox(S.url, token="")

    @classmethod
    def tearDownClass(cls):
        cls.sb.close()

    def test_execute_exit_code_and_output(self):
        sb = self.sb
        r = sb.execute("ls /workspace; exit 3")
        self.assertEqual(r.exit_code, 3)
        self.assertIn("/workspace", r.output)  # on local there is none: ls says so, on stderr, combined
        sb.write(sb.root + "/marker.txt", "m")
        r = sb.execute(f"ls {sb.root}; echo err >&2; exit 3")
        self.assertEqual(r.exit_code, 3)
        self.assertIn("marker.txt", r.output)
        self.assertIn("err", r.output)
        self.assertFalse(r.truncated)
        self.assertEqual(sb.execute("pwd").output.strip(), sb.root)
        self.assertEqual(sb.execute("kill -9 $$").exit_code, 137)

    def test_hang_past_timeout(self):
        t0 = time.monotonic()
        r = self.sb.execute("echo started; sleep 120", timeout=2)
        took = time.monotonic() - t0
        print(f"\n  a hanging command with timeout=2 returned after {took:.2f} s")
        self.assertEqual(r.exit_code, 124)
        self.assertIn("started", r.output)
        self.assertIn("timed out after 2 s", r.output)
        self.assertLess(took, 30)
        self.assertEqual(self.sb.execute("echo after").output, "after\n", "the kernel is usable after a timeout")

    def test_several_mib_of_output_are_bounded(self):
        r = self.sb.execute("head -c 6000000 /dev/zero | tr '\\0' 'a'; echo; echo END")
        self.assertTrue(r.truncated)
        self.assertLess(len(r.output), self.sb.max_output_bytes + 500)
        self.assertIn("bytes of output dropped here; 6000005 in all", r.output)
        self.assertTrue(r.output.endswith("END\n"))
        self.assertEqual(r.exit_code, 0)

    def test_upload_download_per_file_results(self):
        sb, root = self.sb, self.sb.root
        ups = sb.upload_files([(root + "/up/a.txt", b"A"), ("/tmp/kbpy-da-x.txt", b"tmp!"), (root + "/../x", b""),
                               ("relative.txt", b""), (root + "/nul\x00.txt", b""), (root, b"x"),
                               ("/proc/1/nope/x", b"z"), (root + "/up/b.txt", b"B")])
        self.addCleanup(lambda: sb.delete("/tmp/kbpy-da-x.txt"))
        self.assertEqual([u.path for u in ups][:2], [root + "/up/a.txt", "/tmp/kbpy-da-x.txt"])
        self.assertEqual([u.error for u in ups], [None, None, "invalid_path", "invalid_path", "invalid_path",
                                                  "is_directory", "file_not_found", None])
        self.assertEqual(sb.execute("cat /tmp/kbpy-da-x.txt").output, "tmp!")
        downs = sb.download_files([root + "/up/a.txt", "/tmp/kbpy-da-x.txt", root + "/up", "/tmp", "/no/such",
                                   root + "/missing", "rel", root + "/../etc/passwd", root + "/up/b.txt"])
        self.assertEqual([(d.content, d.error) for d in downs], [
            (b"A", None), (b"tmp!", None), (None, "is_directory"), (None, "is_directory"), (None, "file_not_found"),
            (None, "file_not_found"), (None, "invalid_path"), (None, "invalid_path"), (b"B", None)])
        self.assertNotIn(".kernelbox-da", [os.path.basename(e["path"]) for e in sb.ls(root).entries])

    @unittest.skipUnless(os.getuid() == 0, "the quota is a session disk only as root")
    def test_upload_over_quota(self):
        sb = KernelboxSandbox(S.url, token="")
        self.addCleanup(sb.close)
        ups = sb.upload_files([(sb.root + "/small.txt", b"s"), (sb.root + "/big.bin", b"b" * (12 << 20)),
                               (sb.root + "/after.txt", b"a")])
        self.assertEqual([u.error for u in ups], [None, "quota", None])
        self.assertEqual([d.content for d in sb.download_files([sb.root + "/small.txt", sb.root + "/after.txt"])],
                         [b"s", b"a"])

    def test_file_tools_inside_and_outside(self):
        sb = self.sb
        for base in (sb.root + "/tools", "/tmp/kbpy-da-tools-" + sb.id):
            with self.subTest(base=base):
                self.addCleanup(lambda b=base: sb.delete(b))
                self.assertIsNone(sb.write(base + "/a.txt", "one\ntwo\nthree\ntwo\n").error)
                self.assertIsNone(sb.write(base + "/sub/b.py", "print('two')\n").error)
                ls = sb.ls(base)
                self.assertEqual([(os.path.basename(e["path"]), e["is_dir"]) for e in ls.entries],
                                 [("a.txt", False), ("sub", True)])
                r = sb.read(base + "/a.txt", offset=1, limit=2)
                self.assertEqual(r.file_data["content"], "two\nthree")  # lines without their ends, as BaseSandbox
                self.assertEqual((r.start_line, r.end_line, r.total_lines, r.next_offset), (2, 3, 4, 3))
                self.assertTrue(sb.read(base + "/a.txt", limit=0).no_lines_requested)
                self.assertIn("appears multiple times", sb.edit(base + "/a.txt", "two", "2").error)
                e = sb.edit(base + "/a.txt", "two", "2", replace_all=True)
                self.assertEqual((e.error, e.occurrences), (None, 2))
                self.assertIn("not found", sb.edit(base + "/a.txt", "nope", "x").error)
                self.assertEqual(sb.read(base + "/a.txt").file_data["content"], "one\n2\nthree\n2")
                g = sb.grep("two", base)
                self.assertEqual([(os.path.relpath(m["path"], base), m["line"]) for m in g.matches], [("sub/b.py", 1)])
                self.assertEqual(len(sb.grep("2", base).matches), 2)
                self.assertEqual(len(sb.grep("2", base, max_count=1).matches), 1)
                self.assertEqual(sb.grep("two", base, glob="*.txt").matches, [])
                gl = sb.glob("**/*.py", base)
                self.assertEqual([os.path.relpath(m["path"], base) for m in gl.matches], ["sub/b.py"])
                self.assertIsNone(sb.delete(base + "/sub").error)
                self.assertEqual(sb.read(base + "/sub/b.py").error, f"File '{base}/sub/b.py': file_not_found")
                self.assertIsNotNone(sb.delete(base + "/sub").error)
                self.assertIsNotNone(sb.ls(base + "/../x").error)

    def test_async_twins_and_run_python(self):
        sb = self.sb

        async def go():
            r = await sb.aexecute("echo hi; exit 5")
            w = await sb.awrite(sb.root + "/async.txt", "x")
            d = await sb.adownload_files([sb.root + "/async.txt"])
            u = await sb.aupload_files([(sb.root + "/async2.txt", b"y")])
            ls = await sb.als(sb.root)
            rd = await sb.aread(sb.root + "/async2.txt")
            return r, w, d, u, ls, rd

        r, w, d, u, ls, rd = asyncio.run(go())
        self.assertEqual((r.output, r.exit_code), ("hi\n", 5))
        self.assertIsNone(w.error)
        self.assertEqual((d[0].content, u[0].error, rd.file_data["content"]), (b"x", None, "y"))
        self.assertTrue(any(e["path"].endswith("/async.txt") for e in ls.entries))
        self.assertEqual(sb.run_python("v = 41").status, "ok")
        self.assertEqual(sb.run_python("v + 1").result, "42", "run_python shares the stateful kernel")


class StandardSuiteExpectationsTest(kbserve.TimedTest):
    """What Deep Agents' standard sandbox suite (SandboxIntegrationTests) checks, restated
    with unittest (langchain_tests and deepagents cannot be installed here)."""

    def test_tmp_operations(self):
        pc = KernelboxSandboxClient(S.url, token="")
        sb = pc.create()
        self.addCleanup(pc.delete, sandbox_id=sb.id)
        d = "/tmp/kbpy-suite-" + sb.id
        self.addCleanup(sb.execute, f"rm -rf {d}")
        sb.execute(f"rm -rf {d} && mkdir -p {d}")
        content = "Hello, sandbox!\nLine 2\nLine 3"
        w = sb.write(f"{d}/new_file.txt", content)
        self.assertEqual((w.error, w.path), (None, f"{d}/new_file.txt"))
        self.assertEqual(sb.execute(f"cat {d}/new_file.txt").output.strip(), content)
        sb.write(f"{d}/edit.txt", "Hello world\nGoodbye world\nHello again")
        e = sb.edit(f"{d}/edit.txt", "Goodbye", "Farewell")
        self.assertEqual((e.error, e.occurrences), (None, 1))
        self.assertIn("Farewell world", sb.read(f"{d}/edit.txt").file_data["content"])
        sb.write(f"{d}/a.txt", "a")
        sb.write(f"{d}/x.py", "print('x')")
        self.assertIn(f"{d}/a.txt", [i["path"] for i in sb.ls_info(d)])
        self.assertEqual([m["path"] for m in sb.glob_info("*.py", path=d)], ["x.py"])
        sb.write(f"{d}/grep.txt", "a (b)\nstr | int\n")
        m = sb.grep_raw("str | int", path=d)
        self.assertTrue(m[0]["path"].endswith("/grep.txt"))
        self.assertEqual(m[0]["text"].strip(), "str | int")
        files = [(f"{d}/multi_{i}.txt", f"Content {i}".encode()) for i in range(3)]
        files.append((f"{d}/binary.bin", bytes(range(256))))
        files.append((f"{d}/special.txt", b"Roundtrip test: special chars \n\t\r\x00"))
        self.assertEqual([(u.path, u.error) for u in sb.upload_files(files)], [(p, None) for p, _ in files])
        self.assertEqual([(r.path, r.content, r.error) for r in sb.download_files([p for p, _ in files])],
                         [(p, c, None) for p, c in files])
        sb.execute(f"mkdir -p {d}/dir")
        got = sb.download_files([f"{d}/nonexistent.txt", f"{d}/dir", "relative/path.txt"])
        self.assertEqual([(r.content, r.error) for r in got],
                         [(None, "file_not_found"), (None, "is_directory"), (None, "invalid_path")])
        p = f"{d}/missing_parent/sub/up.txt"
        self.assertIsNone(sb.upload_files([(p, b"nope")])[0].error)
        self.assertEqual(sb.download_files([p])[0].content, b"nope")
        self.assertEqual(sb.upload_files([("relative_upload.txt", b"x")])[0].error, "invalid_path")
        self.assertEqual(sb.execute("echo hello").output.strip(), "hello")


class ProviderAndToolTest(kbserve.TimedTest):
    def test_sandbox_client(self):
        pc = KernelboxSandboxClient(S.url, token="")
        sb = pc.create()
        self.assertIn(sb.id, [x.id for x in pc.client.sessions()])
        again = pc.get(sandbox_id=sb.id)
        self.assertEqual(again.id, sb.id)
        with self.assertRaises(SandboxNotFoundError):
            pc.get(sandbox_id="da-no-such-sandbox")
        pc.delete(sandbox_id=sb.id)
        pc.delete(sandbox_id=sb.id)  # idempotent
        with self.assertRaises(SandboxNotFoundError):
            pc.get(sandbox_id=sb.id)

        async def go():
            s2 = await pc.acreate()
            got = await pc.aget(sandbox_id=s2.id)
            await pc.adelete(sandbox_id=s2.id)
            await pc.adelete(sandbox_id=s2.id)
            return got.id == s2.id

        self.assertTrue(asyncio.run(go()))

    def test_sandbox_execute_tool(self):
        c = S.client()
        self.addCleanup(c.close)
        tool = tools.bind(c, budget=2000)
        self.assertEqual(tools.SANDBOX_EXECUTE_SCHEMA["required"], ["code", "session_id"])
        self.assertEqual(tools.openai_tool()["function"]["parameters"], tools.SANDBOX_EXECUTE_SCHEMA)
        a = tool("x = 6 * 7\nprint(x)\nopen('outputs/r.txt', 'w').write('r')", "tool-s")
        self.assertIn("status: ok", a)
        self.assertIn("42", a)
        self.assertIn("r.txt", a)
        a = tool("print('y' * 5_000_000)", "tool-s")
        self.assertLessEqual(len(a.encode()), 2000)
        self.assertIn("bytes dropped here", a)
        a = tool("1/0", "tool-s")
        self.assertIn("ZeroDivisionError", a)
        self.assertIn("failed", tool("1", "bad id!"))
        a = tool("import os; os._exit(1)", "tool-died")
        self.assertIn("status: kernel_died", a)
        self.assertIn("state_lost: true", a)
        self.assertIn("NameError", tool("undefined_name", "tool-s"))
        old = dict(os.environ)
        try:
            os.environ["KERNELBOX_SERVER"] = S.url
            tools._default = None
            self.assertIn("status: ok", tools.sandbox_execute("print(1)", "tool-s"))
        finally:
            os.environ.clear()
            os.environ.update(old)
            tools._default = None


class DockerSmokeTest(kbserve.TimedTest):
    def test_docker_sandbox(self):
        if not kbserve.docker_ready():
            self.skipTest("no Docker daemon or no kernelbox/kernel:latest image")
        d = Serve(backend="docker").start()
        self.addCleanup(d.cleanup)
        sb = KernelboxSandbox(d.url, token="")
        self.addCleanup(sb.close)
        self.assertEqual(sb.root, "/workspace")
        sb.write("/workspace/seen.txt", "s")
        r = sb.execute("ls /workspace; exit 3")
        self.assertEqual(r.exit_code, 3)
        self.assertIn("seen.txt", r.output)
        ups = sb.upload_files([("/tmp/x.txt", b"x"), ("/workspace/../etc/x", b"")])
        self.assertEqual([u.error for u in ups], [None, "invalid_path"])
        self.assertEqual(sb.execute("cat /tmp/x.txt").output, "x")
        self.assertEqual(sb.download_files(["/workspace", "/tmp/x.txt"])[0].error, "is_directory")
        self.assertEqual(sb.run_python("1+1").result, "2")
        # The kernel is not root here: an unreadable file is permission_denied, as the suite expects.
        sb.execute("echo secret > /tmp/noread.txt && chmod 000 /tmp/noread.txt")
        self.assertEqual(sb.download_files(["/tmp/noread.txt"])[0].error, "permission_denied")


if __name__ == "__main__":
    unittest.main()
