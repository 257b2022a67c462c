"""Drives a Jupyter Server (started with --gateway-url at kernelbox) through its
own REST API and kernel WebSocket, as a notebook page would. Prints one JSON
line per step; exits non-zero on the first failure.

Usage: client.py JUPYTER_URL  (the Jupyter Server's token in JUPYTER_TOKEN)
"""
import json
import os
import sys
import time
import uuid
import urllib.request

import websocket  # python3-websocket, a dependency of Debian's jupyter-server

BASE = sys.argv[1].rstrip("/")
TOKEN = os.environ["JUPYTER_TOKEN"]
HEADERS = {"Authorization": "token " + TOKEN, "Content-Type": "application/json"}


def rest(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=HEADERS)
    with urllib.request.urlopen(req, timeout=120) as r:
        raw = r.read()
        return r.status, (json.loads(raw) if raw else None)


def step(what, **kw):
    print(json.dumps({"step": what, **kw}), flush=True)


def fail(msg):
    print(json.dumps({"fail": msg}), flush=True)
    sys.exit(1)


class Kernel:
    def __init__(self, kid):
        self.session = uuid.uuid4().hex
        url = BASE.replace("http", "ws", 1) + "/api/kernels/%s/channels?session_id=%s" % (kid, self.session)
        self.ws = websocket.create_connection(url, header=["Authorization: token " + TOKEN], timeout=120)

    def send(self, msg_type, content, channel="shell"):
        mid = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "channel": channel,
            "header": {"msg_id": mid, "msg_type": msg_type, "session": self.session,
                       "username": "test", "date": "", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "content": content, "buffers": [],
        }))
        return mid

    def wait_for_ready(self):
        """Sends kernel_info_request until one is answered, as jupyter_client's
        wait_for_ready does: Jupyter Server 1.23's gateway proxy drops what a
        client sends before its own connection to the gateway is open."""
        for _ in range(60):
            reply, _ = self.collect(self.send("kernel_info_request", {}), "kernel_info_reply", deadline=1, must=False)
            if reply:
                return reply
        fail("no kernel_info_reply")

    def collect(self, mid, reply_type, deadline=120, must=True):
        """Reads until reply_type and status idle for mid; returns (reply, iopub)."""
        reply, iopub, idle = None, [], reply_type != "execute_reply"
        end = time.time() + deadline
        while time.time() < end and not (reply and idle):
            self.ws.settimeout(max(0.05, end - time.time()))
            try:
                raw = self.ws.recv()
            except websocket.WebSocketTimeoutException:
                break
            m = json.loads(raw)
            if m.get("parent_header", {}).get("msg_id") != mid:
                continue
            t = m["header"]["msg_type"]
            if t == reply_type:
                reply = m
            elif m["channel"] == "iopub":
                if t == "status" and m["content"]["execution_state"] == "idle":
                    idle = True
                elif t != "status":
                    iopub.append(m)
        if not reply and must:
            fail("no %s for %s" % (reply_type, mid))
        return reply, iopub

    def execute(self, code, deadline=120):
        mid = self.send("execute_request", {"code": code, "silent": False, "store_history": True,
                                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
        return self.collect(mid, "execute_reply", deadline)


def stdout_of(iopub):
    return "".join(m["content"]["text"] for m in iopub if m["header"]["msg_type"] == "stream")


def main():
    _, specs = rest("GET", "/api/kernelspecs")
    names = sorted(specs["kernelspecs"])
    step("kernelspecs", names=names, default=specs["default"])
    name = os.environ.get("TEMPLATE", "default")
    if name not in names:
        fail("kernelspec %s not listed: %s" % (name, names))
    status, k = rest("POST", "/api/kernels", {"name": name})
    kid = k["id"]
    step("started", id=kid, status=status, name=k["name"])
    kern = Kernel(kid)
    reply = kern.wait_for_ready()
    step("kernel_info", language=reply["content"]["language_info"]["name"])
    if name == "analyst":
        _, io = kern.execute("print(preset)")
        if stdout_of(io).strip() != "7":
            fail("the template's preload did not run: %r" % stdout_of(io))
    reply, _ = kern.execute("x = 21")
    reply, io = kern.execute("print(x * 2)")
    out = stdout_of(io)
    step("state", stdout=out, status=reply["content"]["status"], count=reply["content"]["execution_count"])
    if out.strip() != "42":
        fail("state not kept across cells: %r" % out)
    reply, _ = kern.collect(kern.send("complete_request", {"code": "impo", "cursor_pos": 4}), "complete_reply")
    step("complete", matches=reply["content"]["matches"][:5])
    mid = kern.send("execute_request", {"code": "import time; time.sleep(60)", "silent": False, "store_history": True,
                                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
    time.sleep(2)
    t0 = time.time()
    rest("POST", "/api/kernels/%s/interrupt" % kid, {})
    reply, io = kern.collect(mid, "execute_reply", deadline=30)
    took = time.time() - t0
    step("interrupt", status=reply["content"]["status"], ename=reply["content"].get("ename"), seconds=round(took, 2))
    if reply["content"].get("ename") != "KeyboardInterrupt" or took > 20:
        fail("interrupt did not stop the sleep: %r" % reply["content"])
    reply, io = kern.execute("print(x)")
    if stdout_of(io).strip() != "21":
        fail("state lost by the interrupt: %r" % stdout_of(io))
    status, _ = rest("POST", "/api/kernels/%s/restart" % kid, {})
    step("restart", status=status)
    reply, io = kern.execute("print('x' in dir())")
    step("after_restart", stdout=stdout_of(io))
    if stdout_of(io).strip() != "False":
        fail("restart kept the namespace: %r" % stdout_of(io))
    _, lst = rest("GET", "/api/kernels")
    step("listed", ids=[m["id"] for m in lst])
    print(json.dumps({"kernel": kid}), flush=True)
    if os.environ.get("PAUSE_BEFORE_SHUTDOWN"):
        sys.stdin.readline()
    kern.ws.close()
    status, _ = rest("DELETE", "/api/kernels/%s" % kid)
    step("shutdown", status=status)
    _, lst = rest("GET", "/api/kernels")
    if any(m["id"] == kid for m in lst):
        fail("kernel still listed after shutdown")
    # A notebook opens its kernel through Jupyter's sessions API, whose start
    # request carries KERNEL_WORKING_DIR in env (accepted, not passed on).
    status, sess = rest("POST", "/api/sessions", {"path": "t.ipynb", "type": "notebook", "name": "t.ipynb",
                                                  "kernel": {"name": name}})
    step("session", status=status, kernel_name=sess["kernel"]["name"])
    sk = Kernel(sess["kernel"]["id"])
    sk.wait_for_ready()
    # Jupyter Server 1.23 sends its whole environment (JUPYTER_TOKEN among it).
    _, io = sk.execute("import os; print([k for k in ('KERNEL_WORKING_DIR', 'JPY_SESSION_NAME', 'JUPYTER_TOKEN') if k in os.environ])")
    if stdout_of(io).strip() != "[]":
        fail("a client's env reached the kernel: %r" % stdout_of(io))
    sk.ws.close()
    rest("DELETE", "/api/sessions/%s" % sess["id"])
    _, lst = rest("GET", "/api/kernels")
    if lst:
        fail("kernels left after the session's deletion: %r" % lst)
    print(json.dumps({"ok": True}), flush=True)


if __name__ == "__main__":
    main()
