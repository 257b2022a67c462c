"""Runs a Jupyter Server for kernelbox and takes every process below it down with it.

Usage: python3 supervisor.py PROGRAM [ARG...]

PR_SET_PDEATHSIG covers the server and its kernels but not what a cell starts: a
background `sleep` (whose parent, the kernel, dies) or a `setsid` daemon is reparented
away and outlives kernelbox. This process is the server's parent and a child
subreaper (PR_SET_CHILD_SUBREAPER), so every orphan of the tree below it is
reparented to it instead of to init, setsid or not, and it can find them all as its
descendants. It kills them all (SIGKILL) and exits when:

- its stdin reaches EOF: kernelbox, which holds the pipe's other end, exited, even
  by SIGKILL (a pipe closes however its holder dies; PR_SET_PDEATHSIG would fire when
  the kernelbox *thread* that started this process exits, which a Go program does not
  control);
- it gets SIGTERM: it passes SIGTERM to the server, gives it GRACE seconds to stop
  its kernels, then kills what is left;
- the server exits, on its own or killed.

The server's stdin is /dev/null, as it was before this process stood between them.
"""
import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE = 8.0

_libc = ctypes.CDLL(None, use_errno=True)
_lock = threading.Lock()
_me = os.getpid()


def _ppid(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            s = f.read()
    except OSError:
        return 0
    f = s[s.rindex(b")") + 2:].split()
    if f[0] == b"Z":
        return 0  # a zombie needs reaping, not killing
    return int(f[1])


def descendants():
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            pid = int(name)
            children.setdefault(_ppid(pid), []).append(pid)
    out, queue = [], [_me]
    while queue:
        for c in children.get(queue.pop(), ()):
            out.append(c)
            queue.append(c)
    return out


def kill_tree():
    """SIGKILLs every descendant until none is left.

    Stopping them first keeps a forking loop from outrunning the scan.
    """
    with _lock:
        for _ in range(50):
            pids = descendants()
            if not pids:
                return
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                for p in pids:
                    try:
                        os.kill(p, sig)
                    except OSError:
                        pass
            time.sleep(0.01)


def _die(code):
    kill_tree()
    os._exit(code)


def _watch_stdin():
    while os.read(0, 4096):
        pass
    _die(1)


def main():
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    server = os.fork()
    if server == 0:
        try:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != _me:
                os._exit(1)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            os.execvp(sys.argv[1], sys.argv[1:])
        finally:
            os._exit(127)

    def on_term(signum, frame):
        try:
            os.kill(server, signal.SIGTERM)
        except OSError:
            pass
        t = threading.Timer(GRACE, _die, (1,))
        t.daemon = True
        t.start()

    signal.signal(signal.SIGTERM, on_term)
    threading.Thread(target=_watch_stdin, daemon=True).start()
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            _die(1)
        if pid == server:
            code = os.waitstatus_to_exitcode(status)
            _die(code if code >= 0 else 128 - code)


main()
