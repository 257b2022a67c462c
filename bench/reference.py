"""Reference measurements for kernelbox's benchmark: the same work done straight over
ZMQ with jupyter_client (no gateway, no HTTP, no WebSocket) or with plain file copies.

It is a long-lived helper driven over stdin/stdout so that the Go benchmark can
interleave its own measurements with these in one run (the machines are shared and
noisy; only ratios measured side by side mean anything). Each command line on stdin
gets one JSON line on stdout:

  trivial N          -> {"ms": [...]}  N round-trips of `x = i; x + 1` (reply + idle)
  stream BYTES       -> {"ms": [t], "bytes": n}  one cell printing BYTES bytes
  lines N SIZE       -> {"ms": [t], "bytes": n}  one cell printing N lines of SIZE bytes,
                        flushing after each (one stream message a line)
  copy SRC DST       -> {"ms": [t]}  shutil.copyfile SRC to DST
  copytree SRC DST   -> {"ms": [t]}  copy every file of SRC into DST
  artifacts DIR N    -> {"ms": [t]}  a cell writes N small files into DIR/out, then
                        they are copied to DIR/art (what "collecting" means)
  analyst CSV N      -> {"ms": [...]}  N runs of the analyst's first cell (import pandas
                        and matplotlib.pyplot, read CSV, describe it); N = 0 runs it
                        once unmeasured, which imports both, and answers "bytes": what
                        it printed of len(df.describe()) (0: the cell failed)
  http MODE URL TOKEN SESSION N FIRST
                     -> {"ms": [...]}  N POSTs of {"code": "x = i; x + 1"} (i = FIRST,
                        FIRST+1, ...) to URL/v1/sessions/SESSION/execute with the bearer
                        TOKEN, each answer checked to be i + 1 ("-" as SESSION: any JSON
                        answer, for the client's own floor). MODE "new": urllib, a new
                        connection per call; "keepalive": one http.client connection
                        kept open across calls and commands.
  quit

Usage: /usr/bin/python3 bench/reference.py   (Debian's python3-jupyter-client)
"""
import http.client
import json
import os
import shutil
import sys
import time
import urllib.parse
import urllib.request

from jupyter_client.manager import start_new_kernel


def run_cell(kc, code, collect_bytes=False):
    # iopub first, until idle, then the shell reply: blocking on the reply while
    # iopub piles up lets the kernel's PUB socket pass its high-water mark and drop
    # messages (the idle status among them) for a cell that sends thousands.
    msg_id = kc.execute(code, store_history=True)
    n = 0
    while True:
        msg = kc.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        t = msg["header"]["msg_type"]
        if t == "status" and msg["content"]["execution_state"] == "idle":
            break
        if collect_bytes and t == "stream":
            n += len(msg["content"]["text"])
    while kc.get_shell_msg(timeout=120)["parent_header"].get("msg_id") != msg_id:
        pass
    return n


_conns = {}


def http_call(mode, url, token, session, i):
    """One POST of the trivial cell as a Python client would send it; the answer's
    JSON is decoded, and checked unless session is "-"."""
    sid = "s" if session == "-" else session
    body = json.dumps({"code": "x = %d; x + 1" % i}).encode()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
    path = "/v1/sessions/%s/execute" % sid
    if mode == "new":
        req = urllib.request.Request(url + path, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=120) as r:
            got = json.loads(r.read())
    elif mode == "keepalive":
        conn = _conns.get(url)
        if conn is None:
            u = urllib.parse.urlsplit(url)
            conn = _conns[url] = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        got = json.loads(r.read())
        if r.status != 200:
            raise RuntimeError("HTTP %d: %s" % (r.status, got))
    else:
        raise ValueError("unknown http mode " + mode)
    if session != "-" and got.get("result") != str(i + 1):
        raise RuntimeError("call %d answered %s" % (i, json.dumps(got)[:300]))


def main():
    km, kc = start_new_kernel(kernel_name="python3")
    try:
        run_cell(kc, "import sys")
        i = 0
        for line in sys.stdin:
            parts = line.split()
            if not parts:
                continue
            cmd = parts[0]
            out = {}
            if cmd == "quit":
                break
            elif cmd == "trivial":
                ms = []
                for _ in range(int(parts[1])):
                    i += 1
                    t0 = time.perf_counter()
                    run_cell(kc, "x = %d; x + 1" % i)
                    ms.append((time.perf_counter() - t0) * 1000)
                out = {"ms": ms}
            elif cmd == "http":
                mode, url, token, session, n, first = parts[1], parts[2], parts[3], parts[4], int(parts[5]), int(parts[6])
                ms = []
                try:
                    for k in range(n):
                        t0 = time.perf_counter()
                        http_call(mode, url, token, session, first + k)
                        ms.append((time.perf_counter() - t0) * 1000)
                    out = {"ms": ms}
                except Exception as e:  # reported to the Go side, which fails the row
                    out = {"error": "http %s: %s" % (mode, e)}
            elif cmd == "stream":
                size = int(parts[1])
                t0 = time.perf_counter()
                n = run_cell(kc, "sys.stdout.write('x' * %d); sys.stdout.flush()" % size, collect_bytes=True)
                out = {"ms": [(time.perf_counter() - t0) * 1000], "bytes": n}
            elif cmd == "lines":
                count, size = int(parts[1]), int(parts[2])
                t0 = time.perf_counter()
                n = run_cell(kc, "for _ in range(%d):\n    sys.stdout.write('x' * %d + '\\n'); sys.stdout.flush()" % (count, size - 1), collect_bytes=True)
                out = {"ms": [(time.perf_counter() - t0) * 1000], "bytes": n}
            elif cmd == "copy":
                t0 = time.perf_counter()
                shutil.copyfile(parts[1], parts[2])
                out = {"ms": [(time.perf_counter() - t0) * 1000]}
            elif cmd == "copytree":
                t0 = time.perf_counter()
                for name in os.listdir(parts[1]):
                    shutil.copyfile(os.path.join(parts[1], name), os.path.join(parts[2], name))
                out = {"ms": [(time.perf_counter() - t0) * 1000]}
            elif cmd == "artifacts":
                d, n = parts[1], int(parts[2])
                src, dst = os.path.join(d, "out"), os.path.join(d, "art")
                os.makedirs(src, exist_ok=True)
                os.makedirs(dst, exist_ok=True)
                i += 1
                t0 = time.perf_counter()
                run_cell(kc, "for k in range(%d):\n    open(%r + '/f%%03d.txt' %% k, 'w').write('%d-%%d' %% k * 50)" % (n, src, i))
                for name in os.listdir(src):
                    shutil.copyfile(os.path.join(src, name), os.path.join(dst, name))
                out = {"ms": [(time.perf_counter() - t0) * 1000]}
            elif cmd == "analyst":
                path, n = parts[1], int(parts[2])
                cell = "import pandas as pd, matplotlib.pyplot as plt; df = pd.read_csv(%r); df.describe()" % path
                if n == 0:
                    out = {"ms": [], "bytes": run_cell(kc, cell + "\nprint(len(df.describe()))", collect_bytes=True)}
                else:
                    ms = []
                    for _ in range(n):
                        t0 = time.perf_counter()
                        run_cell(kc, cell)
                        ms.append((time.perf_counter() - t0) * 1000)
                    out = {"ms": ms}
            else:
                out = {"error": "unknown command " + cmd}
            sys.stdout.write(json.dumps(out) + "\n")
            sys.stdout.flush()
    finally:
        for conn in _conns.values():
            conn.close()
        kc.stop_channels()
        km.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()
