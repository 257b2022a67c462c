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

It also orders each kernel's restarts and shutdowns. When a kernel dies, the server's
restarter restarts it on its own; a reset (POST .../restart) or a DELETE arriving while
it does ran beside it, each starting or stopping "the" kernel process, and one process
was left running that the server no longer knew (one per reset after a death: issue
33). Here a kernel's restart and shutdown hold a per-kernel lock, a restart or shutdown
inside one (a restart's own shutdown) runs under it, and the restarter skips its poll
while another holds it (it looks again at its next poll). A restart asked for (a
reset) starts the restarter's count of deaths in a row again, so that resets after
deaths never add up to its give-up limit.
"""
import asyncio
import inspect
import os
import signal
import sys
import time

from jupyter_client import manager as _jcm
from jupyter_client.ioloop import restarter as _jcr

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


def _held(km):
    """Returns km's lock, and whether the running task already holds it."""
    lock = km.__dict__.get("_kb_lock")
    if lock is None:
        lock = km.__dict__["_kb_lock"] = asyncio.Lock()
    return lock, km.__dict__.get("_kb_owner") is asyncio.current_task()


def _ordered(fn, manager=lambda self: self):
    """Runs fn (a coroutine method) under the lock of the kernel manager(self)."""

    async def run(self, *args, **kwargs):
        km = manager(self)
        lock, mine = _held(km)
        if mine:
            return await fn(self, *args, **kwargs)
        async with lock:
            km.__dict__["_kb_owner"] = asyncio.current_task()
            try:
                return await fn(self, *args, **kwargs)
            finally:
                km.__dict__["_kb_owner"] = None

    return run


def _fresh_count(restart):
    """Wraps restart so that a restart asked for (a reset, not the restarter's own)
    starts the restarter's count of deaths in a row again: it counts a kernel that
    keeps dying as it starts, and gives the kernel up (removes it) after
    restart_limit, which deaths each followed by a reset must not add up to."""

    async def run(self, *args, **kwargs):
        own = _held(self)[1]
        out = await restart(self, *args, **kwargs)
        r = getattr(self, "_restarter", None)
        if not own and r is not None and hasattr(r, "_restart_count"):
            r._restarting, r._restart_count = False, 0
        return out

    return run


def _order_restarts():
    km = _jcm.AsyncKernelManager
    restart, shutdown = km.__dict__.get("restart_kernel"), km.__dict__.get("shutdown_kernel")
    if not (inspect.iscoroutinefunction(restart) and inspect.iscoroutinefunction(shutdown)):
        return
    km.restart_kernel = _fresh_count(_ordered(restart))
    km.shutdown_kernel = _ordered(shutdown)
    rs = getattr(_jcr, "AsyncIOLoopKernelRestarter", None)
    poll = rs.__dict__.get("poll") if rs else None
    if not inspect.iscoroutinefunction(poll):
        return
    ordered_poll = _ordered(poll, lambda r: r.kernel_manager)

    async def _poll(self):
        if _held(self.kernel_manager)[0].locked():
            return  # a restart or shutdown is under way: look again at the next poll
        return await ordered_poll(self)

    rs.poll = _poll


_order_restarts()

from jupyter_server.serverapp import main  # noqa: E402

sys.exit(main())
