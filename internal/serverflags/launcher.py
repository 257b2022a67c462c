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
"""
import sys

from jupyter_server.services.kernels import kernelmanager as _km


def _start_watching_activity(self, kernel_id):
    kernel = self._kernels[kernel_id]
    kernel.execution_state = "starting"
    kernel.reason = ""
    kernel.last_activity = _km.utcnow()


if hasattr(_km.MappingKernelManager, "start_watching_activity") and hasattr(_km, "utcnow"):
    # stop_watching_activity copes with a kernel that has no activity stream.
    _km.MappingKernelManager.start_watching_activity = _start_watching_activity

from jupyter_server.serverapp import main  # noqa: E402

sys.exit(main())
