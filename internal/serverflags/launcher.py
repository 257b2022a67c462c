"""Starts Jupyter Server for kernelbox.

It is `python -m jupyter_server` with one change: the server's kernel activity monitor
is not started. That monitor subscribes a second socket to every kernel's iopub channel
and decodes every message (signature check, JSON, dates) only to keep the REST model's
last_activity and execution_state fields. kernelbox does not read them (the executor
tracks each kernel itself and does its own idle culling), and the extra subscriber costs
about 7% of a small cell's round trip: the kernel publishes every message twice and the
server's single event loop handles each twice. (With Debian's Jupyter Server 1.23 and
jupyter_client 7.4 the monitor never updates the fields anyway: they stay "starting".)
The kernels' REST model keeps the fields, frozen at their start values; a kernel whose
restarts fail is still reported "dead".

Jupyter Server versions without the method run unchanged.

It also ends, whenever a kernel is shut down or restarted (a reset, a restart after a
timeout or a crash, a session's end, the server's shutdown), every process that
kernel started: the kernel launcher puts KERNELBOX_KERNEL=<connection file name> in
the kernel's environment, every process it starts inherits it (setsid or not, whoever
reaped it), and the kernel manager's cleanup_resources, which each shutdown runs
after the kernel process is gone, SIGKILLs every process carrying it. A process that
rewrote its environment (env -i) is not found so; the supervisor still kills it when
kernelbox exits.
"""
import inspect
import os
import signal
import sys
import time

from jupyter_client import manager as _jcm

from jupyter_server.services.kernels import kernelmanager as _km


def _start_watching_activity(self, kernel_id):
    kernel = self._kernels[kernel_id]
    kernel.execution_state = "starting"
    kernel.reason = ""
    kernel.last_activity = _km.utcnow()


if hasattr(_km.MappingKernelManager, "start_watching_activity") and hasattr(_km, "utcnow"):
    # stop_watching_activity copes with a kernel that has no activity stream.
    _km.MappingKernelManager.start_watching_activity = _start_watching_activity



def _tagged(tag):
    want = b"\0KERNELBOX_KERNEL=" + tag.encode() + b"\0"
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                env = f.read()
        except OSError:
            continue
        if want in b"\0" + env + b"\0":
            out.append(int(name))
    return out


def _kill_tagged(km):
    """SIGKILLs every process the kernel of km started, until none is left."""
    cf = getattr(km, "connection_file", "")
    if not cf:
        return
    tag = os.path.splitext(os.path.basename(cf))[0]
    for _ in range(50):
        pids = _tagged(tag)
        if not pids:
            return
        # Stopped first, so that a forking loop cannot outrun the scan.
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for p in pids:
                try:
                    os.kill(p, sig)
                except OSError:
                    pass
        time.sleep(0.01)


def _patch_cleanup(cls):
    orig = cls.__dict__.get("cleanup_resources")
    if orig is None:
        return
    if inspect.iscoroutinefunction(orig):

        async def cleanup_resources(self, restart=False):
            _kill_tagged(self)
            return await orig(self, restart=restart)

    else:

        def cleanup_resources(self, restart=False):
            _kill_tagged(self)
            return orig(self, restart=restart)

    cls.cleanup_resources = cleanup_resources


for _cls in (_jcm.KernelManager, _jcm.AsyncKernelManager):
    _patch_cleanup(_cls)

from jupyter_server.serverapp import main  # noqa: E402

sys.exit(main())
