"""Pins the ipykernel behaviour kernelsync.py relies on, in a real kernel started
through jupyter_client with this interpreter (Debian's /usr/bin/python3 and its
ipykernel), so that an ipykernel upgrade that breaks it fails here:

  - the request being handled is the whole message, unknown content fields
    included, through the public get_ipython().get_parent() (and the kernel's
    get_parent("shell")), while its user_expressions are evaluated;
  - a silent execute_request with store_history=False leaves execution_count alone;
  - a user expression whose value has _ipython_display_ answers with empty data;
  - the module itself, installed as the backend installs it, reads a payload
    from the request (setup answers parent=True);
  - the kernel calls its do_shutdown(restart) when the server shuts it down or
    restarts it, so the module's hook removes the session directory on a shutdown
    and keeps it across a restart.

kernelsync.py uses no private ipykernel name.
"""
import ast
import base64
import hashlib
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import ipykernel  # the kernel runs this interpreter's ipykernel
    import jupyter_client
except ImportError as e:  # pragma: no cover
    jupyter_client = None
    MISSING = str(e)

NAME = "_kernelbox_sync_pin"
NONCE = "0123456789abcdef0123456789abcdef"

# Skipped without Jupyter, unless KERNELBOX_REQUIRE_JUPYTER=1 (CI) makes that a failure.
REQUIRED = os.environ.get("KERNELBOX_REQUIRE_JUPYTER") == "1"


@unittest.skipIf(jupyter_client is None and not REQUIRED, "jupyter_client or ipykernel missing")
class KernelRig(unittest.TestCase):
    """A real kernel for the class's tests, and the helpers that drive it."""

    @classmethod
    def setUpClass(cls):
        if jupyter_client is None:
            raise AssertionError("KERNELBOX_REQUIRE_JUPYTER=1 but " + MISSING)
        os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # the kernel's debugger warns otherwise
        cls.km, cls.kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")

    @classmethod
    def tearDownClass(cls):
        cls.kc.stop_channels()
        if cls.km.is_alive():
            cls.km.shutdown_kernel(now=True)
        del cls.kc

    def request(self, exprs, code="", silent=True, **extra):
        content = {"code": code, "silent": silent, "store_history": not silent, "user_expressions": exprs,
                   "allow_stdin": False, "stop_on_error": False}
        content.update(extra)
        msg = self.kc.session.msg("execute_request", content)
        self.kc.shell_channel.send(msg)
        while True:
            reply = self.kc.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                return reply["content"]

    def value(self, reply, name="r"):
        self.assertEqual(reply["status"], "ok", reply)
        r = reply["user_expressions"][name]
        self.assertEqual(r["status"], "ok", r)
        return r["data"]

    def install(self):
        """Installs the module as the backend does."""
        with open(os.path.join(HERE, "kernelsync.py"), "rb") as f:
            src = base64.b64encode(f.read()).decode("ascii")
        install = ("(lambda m: (exec(__import__('base64').b64decode('%s').decode('utf-8'), m.__dict__), "
                   "__import__('sys').modules.__setitem__(m.__name__, m), 'installed')[-1])"
                   "(__import__('types').ModuleType('%s'))") % (src, NAME)
        self.assertEqual(self.value(self.request({"r": install}))["text/plain"], repr("installed"))

    def call(self, op, args, seq=None, data=None):
        """Runs one of the module's operations as the backend does."""
        env = {"op": op, "args": args}
        extra = {}
        if seq is not None:
            env["seq"] = seq
            extra["kernelbox"] = {"seq": seq, "data": base64.b64encode(data).decode("ascii")}
        arg = base64.b64encode(json.dumps(env).encode()).decode()
        reply = self.request({"r": "__import__('%s').call('%s')" % (NAME, arg)}, **extra)
        return json.loads(self.value(reply)["text/plain"])


@unittest.skipIf(jupyter_client is None and not REQUIRED, "jupyter_client or ipykernel missing")
class IPyKernelPin(KernelRig):
    def test_kernel_runs_this_interpreter(self):
        # What is pinned is this interpreter's ipykernel (Debian's 6.17 on the
        # machines kernelbox is built on), not some other installation's.
        self.assertEqual(self.km.kernel_spec.argv[0], sys.executable)
        reply = self.request({"r": "__import__('ipykernel').__version__"})
        self.assertEqual(ast.literal_eval(self.value(reply)["text/plain"]), ipykernel.__version__)

    def test_parent_is_the_whole_request_with_unknown_fields(self):
        kb = {"seq": 3, "data": "eA=="}
        reply = self.request({
            "shell": "get_ipython().get_parent()['content']['kernelbox']",
            "kernel": "get_ipython().kernel.get_parent('shell')['content']['kernelbox']",
            "type": "get_ipython().get_parent()['header']['msg_type']",
        }, kernelbox=kb)
        self.assertEqual(self.value(reply, "shell")["text/plain"], repr(kb))
        self.assertEqual(self.value(reply, "kernel")["text/plain"], repr(kb))
        self.assertEqual(self.value(reply, "type")["text/plain"], repr("execute_request"))

    def test_silent_requests_leave_the_execution_count_alone(self):
        before = self.request({}, code="1", silent=False)["execution_count"]
        for _ in range(3):
            self.request({"r": "1+1"})
        after = self.request({}, code="1", silent=False)["execution_count"]
        self.assertEqual(after, before + 1)

    def test_ipython_display_gives_empty_data(self):
        reply = self.request({"r": "type('U', (), {'_ipython_display_': lambda self: None, '__repr__': lambda self: '0'})()"})
        self.assertEqual(self.value(reply), {})

    def test_module_reads_its_payload_from_the_request(self):
        self.install()
        cwd = ast.literal_eval(self.value(self.request({"r": "__import__('os').getcwd()"}))["text/plain"])
        with tempfile.TemporaryDirectory() as tmp:
            ans = self.call("setup", {"base": tmp, "sid": "pin", "nonce": NONCE, "known": ""}, seq=1, data=b"")
            self.assertTrue(ans["parent"], "the payload route works with this ipykernel")
            data = b"through the request's content"
            w = self.call("wfile", {"rel": "inputs/p.txt", "size": len(data), "sha": hashlib.sha256(data).hexdigest(), "mode": 0o644}, seq=2, data=data)
            self.assertEqual(w["sha"], hashlib.sha256(data).hexdigest())
            with open(os.path.join(tmp, "pin-" + NONCE, "inputs", "p.txt"), "rb") as f:
                self.assertEqual(f.read(), data)
            self.request({"r": "__import__('%s').remove()" % (NAME,)})
            self.assertEqual(ast.literal_eval(self.value(self.request({"r": "__import__('os').getcwd()"}))["text/plain"]), cwd)


@unittest.skipIf(jupyter_client is None and not REQUIRED, "jupyter_client or ipykernel missing")
class ShutdownPin(KernelRig):
    """A kernel of its own, restarted and shut down as Jupyter Server does
    (shutdown_request with restart true, then false)."""

    def test_restart_keeps_the_directory_and_shutdown_removes_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.install()
            d = self.call("setup", {"base": tmp, "sid": "sd", "nonce": NONCE, "known": ""}, seq=1, data=b"")["dir"]
            self.assertEqual(d, os.path.join(tmp, "sd-" + NONCE))
            with open(os.path.join(d, "outputs", "o.txt"), "w") as f:
                f.write("o")
            self.km.restart_kernel(now=False)
            self.kc.wait_for_ready(timeout=60)
            self.assertTrue(os.path.exists(os.path.join(d, "outputs", "o.txt")), "a restart removed the directory")

            self.install()
            ans = self.call("setup", {"base": tmp, "sid": "sd", "nonce": NONCE, "known": d}, seq=1, data=b"")
            self.assertEqual((ans["dir"], ans["new"], ans["made"]), (d, True, False))
            self.km.shutdown_kernel(now=False)
            self.assertFalse(self.km.is_alive())
            self.assertEqual(os.listdir(tmp), [], "a shutdown left the directory")


if __name__ == "__main__":
    unittest.main()
