"""KernelboxProvider, Deep Agents CLI's sandbox provider (``dcode --sandbox kernelbox``):
its shape, get_or_create's reattach / refuse / fork, the no-server error, and the
package installed offline into a fresh venv, found through its entry point."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import unittest
from unittest import mock

import kbserve
from kbserve import Serve

from kernelbox.deepagents import (KernelboxProvider, KernelboxSandbox, SandboxError, SandboxNotFoundError,
                                  SandboxProviderMetadata)

S: Serve
GROUP = "deepagents_code.sandbox_providers"


def setUpModule():
    global S
    kbserve.require_jupyter()
    d = tempfile.mkdtemp(prefix="kbpy-tmpl-")
    f = os.path.join(d, "templates.json")
    with open(f, "w") as fh:
        json.dump({"templates": [{"name": "other", "description": "another shape", "env": {"SHAPE": "other"}}]}, fh)
    S = Serve(extra=["--templates", f]).start()
    S.extra_dir = d


def tearDownModule():
    if globals().get("S"):
        S.cleanup()
        shutil.rmtree(S.extra_dir, ignore_errors=True)


def provider(**env):
    """A provider built with no arguments, as the CLI builds it, from env."""
    base = {"KERNELBOX_SERVER": S.url, "KERNELBOX_TOKEN": "", "KERNELBOX_TEMPLATE": ""}
    base.update(env)
    with mock.patch.dict(os.environ, base):
        return KernelboxProvider()


class ProviderTest(kbserve.TimedTest):
    def test_metadata(self):
        m = provider().metadata
        self.assertIsInstance(m, SandboxProviderMetadata)
        self.assertEqual((m.name, m.working_dir, m.supports_sandbox_id, m.supports_snapshot_name, m.backend_module),
                         ("kernelbox", "/workspace", True, True, "kernelbox.deepagents"))
        self.assertEqual((m.install.kind, m.install.name), ("package", "kernelbox"))

    def test_get_or_create(self):
        p = provider()
        sb = p.get_or_create()
        self.addCleanup(p.delete, sandbox_id=sb.id)
        self.assertIsInstance(sb, KernelboxSandbox)
        self.assertEqual(sb.execute("echo hi").output, "hi\n")
        sb.run_python("kept = 7")
        again = p.get_or_create(sandbox_id=sb.id)
        self.assertEqual(again.run_python("kept").result, "7", "reattached to the same session")
        named = p.get_or_create(sandbox_id="da-named-1")
        self.addCleanup(p.delete, sandbox_id="da-named-1")
        self.assertEqual(named.id, "da-named-1", "an unknown id is created")
        with self.assertRaises(SandboxError) as cm:
            p.get_or_create(sandbox_id=sb.id, template="other")
        self.assertIn("exists with template 'default', not 'other'", str(cm.exception))
        for bad in ("bad id!", "../x", "x" * 65):
            with self.subTest(id=bad), self.assertRaises(SandboxError) as cm:
                p.get_or_create(sandbox_id=bad)
            self.assertIn("kernelbox refuses it", str(cm.exception))
        p.delete(sandbox_id=sb.id)
        p.delete(sandbox_id=sb.id)  # idempotent

    def test_template_from_environment_or_argument(self):
        p = provider(KERNELBOX_TEMPLATE="other")
        sb = p.get_or_create()
        self.addCleanup(p.delete, sandbox_id=sb.id)
        self.assertEqual(sb.execute("echo $SHAPE").output, "other\n")
        self.assertEqual(p.client.session(sb.id).template, "other")
        q = provider()
        sb2 = q.get_or_create(template="other")
        self.addCleanup(q.delete, sandbox_id=sb2.id)
        self.assertEqual(q.client.session(sb2.id).template, "other")

    def test_snapshot_is_a_hibernated_session_forked(self):
        p = provider()
        base = p.get_or_create(sandbox_id="da-snap-base")
        self.addCleanup(p.delete, sandbox_id="da-snap-base")
        base.run_python("import pandas as pd\ndf = pd.DataFrame({'a': range(1000)})")
        base.write(base.root + "/data.csv", "a\n1\n")
        p.client.hibernate("da-snap-base")
        sb = p.get_or_create(snapshot="da-snap-base")
        self.addCleanup(p.delete, sandbox_id=sb.id)
        self.assertNotEqual(sb.id, "da-snap-base")
        self.assertEqual(sb.run_python("len(df)").result, "1000", "the loaded data came with the fork")
        self.assertEqual(sb.read(sb.root + "/data.csv").file_data["content"], "a\n1")
        self.assertEqual(p.client.session("da-snap-base").state, "hibernated", "the snapshot stays as it was")
        with self.assertRaises(SandboxNotFoundError):
            p.get_or_create(snapshot="da-no-such-snapshot")
        with self.assertRaises(SandboxError):
            p.get_or_create(sandbox_id=sb.id, snapshot="da-snap-base")

    def test_async_twins(self):
        p = provider()

        async def go():
            sb = await p.aget_or_create()
            out = (await sb.aexecute("echo async")).output
            await p.adelete(sandbox_id=sb.id)
            return sb.id, out

        sid, out = asyncio.run(go())
        self.assertEqual(out, "async\n")
        self.assertNotIn(sid, [s.id for s in S.client().sessions()])

    def test_no_server(self):
        d = tempfile.mkdtemp(prefix="kbpy-nosrv-")
        self.addCleanup(shutil.rmtree, d, True)
        p = provider(KERNELBOX_SERVER="unix:" + os.path.join(d, "none.sock"))  # constructing never dials
        self.assertEqual(p.metadata.name, "kernelbox")
        with self.assertRaises(SandboxError) as cm:
            p.get_or_create()
        msg = str(cm.exception)
        for want in ("no kernelbox server answers at unix:", "kernelbox serve", "KERNELBOX_SERVER", "KERNELBOX_TOKEN"):
            self.assertIn(want, msg)


class VenvInstallTest(kbserve.TimedTest):
    """./python installs offline with Debian's pip into a fresh venv, and Deep Agents'
    CLI would find the provider by its entry point, build it with no arguments and run a command."""

    def test_install_and_discover(self):
        if not os.path.exists("/usr/bin/python3") or subprocess.run(
                ["/usr/bin/python3", "-c", "import venv, ensurepip, pip"], capture_output=True).returncode:
            if os.environ.get("CI") == "true":
                self.fail("python3-venv or python3-pip is missing (scripts/setup.sh installs them)")
            self.skipTest("python3-venv is missing")
        d = tempfile.mkdtemp(prefix="kbpy-venv-")
        self.addCleanup(shutil.rmtree, d, True)
        src = os.path.join(d, "src")  # a copy: pip builds in the tree it is given
        shutil.copytree(kbserve.PYDIR, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.egg-info", "build"))
        venv = os.path.join(d, "venv")
        # --system-site-packages: Debian's pip and setuptools install and build the package
        # (no pip copied into the venv, no index asked).
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", venv], check=True)
        r = subprocess.run([venv + "/bin/python", "-m", "pip", "install", "--no-index", "--no-build-isolation",
                            "--no-deps", "-q", src], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        probe = f"""
import importlib.metadata as md, json
eps = [e for e in md.entry_points(group={GROUP!r}) if e.name == "kernelbox"]
cls = eps[0].load()
p = cls()
sb = p.get_or_create()
out = sb.execute("echo from-venv").output
p.delete(sandbox_id=sb.id)
import kernelbox
print(json.dumps({{"value": eps[0].value, "out": out, "file": kernelbox.__file__, "meta": p.metadata.name}}))
"""
        env = dict(os.environ, KERNELBOX_SERVER=S.url, KERNELBOX_TOKEN="")
        r = subprocess.run([venv + "/bin/python", "-c", probe], capture_output=True, text=True, env=env, cwd=d)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(got["value"], "kernelbox.deepagents:KernelboxProvider")
        self.assertEqual((got["out"], got["meta"]), ("from-venv\n", "kernelbox"))
        self.assertTrue(got["file"].startswith(venv + "/"), got["file"])


if __name__ == "__main__":
    unittest.main()
