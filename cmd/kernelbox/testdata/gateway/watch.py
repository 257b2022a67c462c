"""Watches an agent's kernelbox session through a Jupyter Server started with
--gateway-url at kernelbox: opens the session's kernel WebSocket through Jupyter
Server, checks that it may not run code there (read-only), prints {"ready": true},
then prints what the next call an agent runs on the session shows it, and how
long each printed line took from the kernel's print to this client.

Usage: watch.py JUPYTER_URL SESSION_ID  (the Jupyter Server's token in JUPYTER_TOKEN)
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import websocket  # noqa: E402

from client import Kernel, fail, step  # noqa: E402


def main():
    kern = Kernel(sys.argv[2])
    kern.wait_for_ready()
    reply, _ = kern.execute("x = 0", deadline=30)
    if reply["content"].get("ename") != "ReadOnly":
        fail("a watcher ran code in an agent's session: %r" % reply["content"])
    step("read_only", evalue=reply["content"]["evalue"][:100])
    print(json.dumps({"ready": True}), flush=True)
    code, out, lags = None, "", []
    end = time.time() + 120
    while time.time() < end:
        kern.ws.settimeout(max(0.05, end - time.time()))
        try:
            m = json.loads(kern.ws.recv())
        except websocket.WebSocketTimeoutException:
            break
        if not m.get("parent_header", {}).get("msg_id", "").startswith("kernelbox-call-"):
            continue
        t = m["header"]["msg_type"]
        if t == "execute_input":
            code = m["content"]["code"]
        elif t == "stream":
            out += m["content"]["text"]
            for line in m["content"]["text"].splitlines():
                f = line.split()
                if len(f) == 3 and f[0] == "t":
                    lags.append((time.time() - float(f[2])) * 1000)
        elif t == "status" and m["content"]["execution_state"] == "idle" and code is not None:
            break
    if code is None:
        fail("the agent's call never reached the watcher")
    p50 = statistics.median(lags) if lags else -1
    print(json.dumps({"watched": {"code": code, "stdout": out, "lines": len(lags), "lag_p50_ms": round(p50, 2)}}), flush=True)


main()
