package serverflags

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kernelbox/kernelbox/api"
)

// KernelName is the kernelspec kernelbox installs for the servers it starts (local and
// docker): kernels started by kernelbox's own launcher. Its name is api.OwnKernelName,
// which the executor hides from the kernels it lists to a client.
const KernelName = api.OwnKernelName

// SpecName returns the kernelspec to start for a session's kernel name
// (executor.SessionSpec.Template.Kernel) on a server kernelbox started: "" and "python3" mean
// kernelbox's own Python kernelspec (KernelName), whose launcher the executor relies on
// for its Python-only extras; any other name (such as "ir", Debian's R kernel) is the
// server's kernelspec of that name, started as its kernel.json says, without the
// launcher: such kernels get no fd capture, no foreign-output count and no process
// tag, so what they start is ended with the server or container, not with the kernel.
func SpecName(kernel string) string {
	switch kernel {
	case "", "python3":
		return KernelName
	}
	return kernel
}

// kernelLauncher starts ipykernel so that it dies with the Jupyter server that started it:
// PR_SET_PDEATHSIG makes the Linux kernel SIGKILL it when its parent exits, even by
// SIGKILL, so no kernel outlives kernelbox (the server itself is started the same way).
// ipykernel's own parent poller only notices reparenting to pid 1.
//
// It also lifts ZMQ's send high-water mark on the kernel's sockets: past it (1000
// messages by default) a PUB socket drops messages without a word, so a server that
// fell behind a cell's output for a moment (paused, or starved of CPU) lost output,
// and with the final "idle" status lost the call waited out its whole timeout. The
// output waits in the kernel instead, as much as the cell printed.
//
// And it replaces ipykernel's reader of the kernel's own fds 1 and 2 (what
// subprocesses and os.write print): that reader decodes each 1000-byte read as
// UTF-8, so the first undecodable read (or a character split between two reads)
// raised in its thread and ended it for good; fd output was then dropped silently
// and a subprocess printing more than a pipe's worth blocked. This one decodes
// incrementally, with undecodable bytes replaced by U+FFFD.
//
// It counts what threads started in an earlier cell write to stdout/stderr while a
// later cell runs: ipykernel stamps such output with the running request, so it
// lands in that call's output. The count since the cell began rides on the cell's
// execute_reply as "kernelbox_foreign" (jupyter.ExecuteReply.Foreign), when not 0:
// no extra expression is evaluated per call.
//
// It makes a flush of stdout or stderr with nothing to send return at once. ipykernel
// flushes both streams three times in every cell, and each flush hands two callbacks
// to the kernel's IO thread and sleeps until that thread has run them, wanted or not:
// about 1.5 ms of a trivial cell's 7 (halved, against ipykernel over ZMQ, by this
// alone). A flush is skipped only when every write to the stream that had returned
// was already handed to the IO thread's queue by an earlier flush (a count of both,
// the handed count taken before that flush empties the buffer): the status "idle"
// the kernel sends after the cell still queues behind every write of the cell, as
// before. A stream that echoes elsewhere keeps ipykernel's flush. With it go two
// options: IPython's history database is off (its thread wrote every cell to
// SQLite; In, Out, _i and %history for the kernel's own session work from memory,
// and %history -g, across kernels, finds nothing), and ipykernel's 0.5 ms sleep
// before each execute_reply is 0 (it gave iopub output a head start over the reply
// for clients that stop reading at the reply; kernelbox reads until "idle").
//
// It tags what the kernel starts: KERNELBOX_KERNEL, named after the connection file
// (kernel-ID), is in the environment of every process the kernel starts, which
// survives setsid and reparenting; the server launcher kills the tagged processes
// when the kernel is shut down or restarted (see launcher.py).
//
// When the kernel's channels are unix sockets (transport "ipc", as the local backend
// runs them), the pipe that carries output of forked children (multiprocessing) to the
// iopub thread is one too, next to them: ipykernel binds it to a random loopback TCP
// port, which every user of the host can connect to.
//
// debugpy is kept out of the kernel's start (ipykernel imports it to offer its
// debugger, which the kernelspec turns off): a third of the 0.5 CPU-seconds that
// importing ipykernel takes on the 2-core machine. Code in the kernel can still
// import it; the block is lifted before the kernel runs, and ipykernel's warning
// that its debugger is off is not logged at each start.
const kernelLauncher = `import sys
if sys.path and sys.path[0] == "":
    del sys.path[0]
import ctypes, os, signal
try:
    os.environ["KERNELBOX_KERNEL"] = os.path.splitext(os.path.basename(sys.argv[sys.argv.index("-f") + 1]))[0]
except (ValueError, IndexError):
    pass
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
except Exception:
    pass
_ppid = os.environ.get("JPY_PARENT_PID", "")
if _ppid.isdigit() and os.getppid() != int(_ppid):
    os._exit(1)
sys.modules["debugpy"] = None
import zmq
_context_init = zmq.Context.__init__
def _unbounded(self, *args, **kwargs):
    _context_init(self, *args, **kwargs)
    self.setsockopt(zmq.SNDHWM, 0)
zmq.Context.__init__ = _unbounded
import codecs
from ipykernel import iostream as _iostream
def _watch_pipe_fd(self):
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        bts = os.read(self._fid, 1000)
        while bts and self._should_watch:
            text = decoder.decode(bts)
            if text:
                self.write(text)
            os.write(self._original_stdstream_copy, bts)
            bts = os.read(self._fid, 1000)
        text = decoder.decode(b"", True)
        if text:
            self.write(text)
    except Exception:
        self._exc = sys.exc_info()
if hasattr(_iostream.OutStream, "_watch_pipe_fd"):
    _iostream.OutStream._watch_pipe_fd = _watch_pipe_fd
import threading as _threading
from ipykernel import ipkernel as _ipkernel
_kb = {"cell": 0, "foreign": 0}
_thread_start = _threading.Thread.start
def _kb_start(self, *args, **kwargs):
    self._kb_cell = _kb["cell"]
    return _thread_start(self, *args, **kwargs)
_threading.Thread.start = _kb_start
_out_write = _iostream.OutStream.write
_kb_lock = _threading.Lock()
def _kb_write(self, string):
    cell = getattr(_threading.current_thread(), "_kb_cell", 0)
    if cell and cell != _kb["cell"]:
        try:
            _kb["foreign"] += len(string)
        except TypeError:
            pass
    n = _out_write(self, string)
    with _kb_lock:
        self._kb_writes = getattr(self, "_kb_writes", 0) + 1
    return n
_iostream.OutStream.write = _kb_write
_flush_buffered = getattr(_iostream.OutStream, "_flush", None)
_flush_synced = _iostream.OutStream.flush
if _flush_buffered is not None:
    def _kb_flush_buffered(self):
        with _kb_lock:
            n = getattr(self, "_kb_writes", 0)
        _flush_buffered(self)
        self._kb_flushed = n
    def _kb_flush(self):
        if getattr(self, "echo", None) is None and getattr(self, "_kb_flushed", 0) == getattr(self, "_kb_writes", 0):
            return
        return _flush_synced(self)
    _iostream.OutStream._flush = _kb_flush_buffered
    _iostream.OutStream.flush = _kb_flush
_do_execute = _ipkernel.IPythonKernel.do_execute
async def _kb_do_execute(self, code, silent, *args, **kwargs):
    if not silent:
        _kb["cell"] += 1
        _kb["foreign"] = 0
    reply = await _do_execute(self, code, silent, *args, **kwargs)
    if not silent and _kb["foreign"] and isinstance(reply, dict):
        reply["kernelbox_foreign"] = _kb["foreign"]
    return reply
_ipkernel.IPythonKernel.do_execute = _kb_do_execute
def _ipc_pipe():
    try:
        import json
        with open(sys.argv[sys.argv.index("-f") + 1]) as f:
            info = json.load(f)
    except Exception:
        return None
    if info.get("transport") != "ipc" or not info.get("ip", "").startswith("/"):
        return None
    return "ipc://" + info["ip"] + "-pipe"
_pipe = _ipc_pipe()
from ipykernel import iostream
if _pipe and hasattr(iostream.IOPubThread, "_setup_pipe_in"):
    def _setup_pipe_in(self):
        self._pipe_uuid = os.urandom(16)
        pipe_in = self.socket.context.socket(zmq.PULL)
        pipe_in.linger = 0
        pipe_in.bind(_pipe)
        self._pipe_port = 0
        self._pipe_in = iostream.ZMQStream(pipe_in, self.io_loop)
        self._pipe_in.on_recv(self._handle_pipe_msg)
    def _setup_pipe_out(self):
        ctx = zmq.Context()
        pipe_out = ctx.socket(zmq.PUSH)
        pipe_out.linger = 3000
        pipe_out.connect(_pipe)
        return ctx, pipe_out
    iostream.IOPubThread._setup_pipe_in = _setup_pipe_in
    iostream.IOPubThread._setup_pipe_out = _setup_pipe_out
from ipykernel import kernelapp
sys.modules.pop("debugpy", None)
import logging as _logging
class _KbNoDebuggerNote(_logging.Filter):
    def filter(self, record):
        return "debugpy_stream undefined" not in str(record.msg)
_logging.getLogger("IPKernelApp").addFilter(_KbNoDebuggerNote())
kernelapp.launch_new_instance()
`

// WriteKernelSpec installs the kernelbox kernelspec under dataDir/kernels, running
// python (as the server sees it). Its files are world-readable (0444, directories
// 0755): a container's server runs as another user than the one writing them; keep
// dataDir itself private where that matters.
func WriteKernelSpec(dataDir, python string) error {
	dir := filepath.Join(dataDir, "kernels", KernelName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("kernelspec: %w", err)
	}
	b, err := KernelSpec(python)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel.json"), b, 0o444); err != nil {
		return fmt.Errorf("kernelspec: %w", err)
	}
	return nil
}

// KernelSpec returns the kernel.json of the kernelbox kernelspec, running python, for
// a server whose files are not written by kernelbox's host (the swarm backend ships
// it as a swarm config at JUPYTER_PATH/kernels/KernelName/kernel.json).
func KernelSpec(python string) ([]byte, error) {
	spec := map[string]any{
		"argv":           []string{python, "-Xfrozen_modules=off", "-c", kernelLauncher, "-f", "{connection_file}", "--HistoryManager.enabled=False", "--IPythonKernel._execute_sleep=0"},
		"display_name":   "Python 3 (kernelbox)",
		"language":       "python",
		"interrupt_mode": "signal",
		"env": map[string]string{
			"MPLBACKEND":                     "module://matplotlib_inline.backend_inline",
			"PYDEVD_DISABLE_FILE_VALIDATION": "1",
			"PYTHONDONTWRITEBYTECODE":        "1",
		},
		"metadata": map[string]any{"debugger": false},
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("kernelspec: %w", err)
	}
	return b, nil
}
