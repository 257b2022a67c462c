"""A trivial cell through the Python client (keep-alive) beside jupyter_client over ZMQ.

One interleaved run, rounds of blocks in rotating order, each block N calls of
``x = i; x + 1`` (answer checked):

- ``kernelbox keep-alive``: kernelbox.Client on a loopback `kernelbox serve --backend local`
- ``kernelbox new conn``: a new kernelbox.Client (a new connection) per call
- ``raw http.client keep``: the same POST by hand on a kept http.client connection, no
  client library: the floor of the client's own overhead
- ``zmq stock``: jupyter_client to a stock ipykernel (kernelspec python3)
- ``zmq kernelbox kernel``: jupyter_client to the same kernel kernelbox starts: its own
  kernelspec (kernelbox-python3), launcher included, as serve installed it

Usage: /usr/bin/python3 python/bench/trivial.py [ROUNDS] [N]
"""

from __future__ import annotations

import glob
import http.client
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

import kbserve  # noqa: E402

import kernelbox  # noqa: E402
from jupyter_client.manager import start_new_kernel  # noqa: E402


def zmq_cell(kc, code: str) -> None:
    """Run code over ZMQ as bench/reference.py does: iopub until idle, then the reply."""
    msg_id = kc.execute(code, store_history=True)
    while True:
        m = kc.get_iopub_msg(timeout=60)
        if m["parent_header"].get("msg_id") == msg_id and m["header"]["msg_type"] == "status" \
                and m["content"]["execution_state"] == "idle":
            break
    while kc.get_shell_msg(timeout=60)["parent_header"].get("msg_id") != msg_id:
        pass


def main() -> None:
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # quiets the kernels' debugger warning
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    s = kbserve.Serve(tcp=True, token="bench").start()
    kms = []
    try:
        c = s.client()
        c.execute("bench", "1")
        specs = glob.glob(os.path.join(s.tmp, "*", "data", "kernels", "kernelbox-python3", "kernel.json"))
        if not specs:
            raise SystemExit("bench: serve's kernelbox-python3 kernelspec not found under " + s.dir)
        km1, kc1 = start_new_kernel(kernel_name="python3")
        kms.append((km1, kc1))
        os.environ["JUPYTER_PATH"] = os.path.dirname(os.path.dirname(os.path.dirname(specs[0])))
        km2, kc2 = start_new_kernel(kernel_name="kernelbox-python3")
        kms.append((km2, kc2))
        counter = [0]

        def kb_keep():
            counter[0] += 1
            i = counter[0]
            assert c.execute("bench", f"x = {i}; x + 1").result == str(i + 1)

        def kb_new():
            counter[0] += 1
            i = counter[0]
            with s.client() as fresh:
                assert fresh.execute("bench", f"x = {i}; x + 1").result == str(i + 1)

        raw = http.client.HTTPConnection("127.0.0.1", s.port)

        def raw_keep():  # the same request by hand on a kept http.client connection: the client's floor
            counter[0] += 1
            i = counter[0]
            raw.request("POST", "/v1/sessions/bench/execute", body=json.dumps({"code": f"x = {i}; x + 1"}).encode(),
                        headers={"Content-Type": "application/json", "Authorization": "Bearer bench"})
            assert json.loads(raw.getresponse().read())["result"] == str(i + 1)

        def zmq(kc):
            def run():
                counter[0] += 1
                zmq_cell(kc, f"x = {counter[0]}; x + 1")
            return run

        kinds = {"kernelbox keep-alive": kb_keep, "kernelbox new conn": kb_new, "raw http.client keep": raw_keep,
                 "zmq stock ipykernel": zmq(kc1), "zmq kernelbox's kernel": zmq(kc2)}
        for f in kinds.values():  # warm up
            for _ in range(5):
                f()
        times = {k: [] for k in kinds}
        names = list(kinds)
        for r in range(rounds):
            for k in names[r % len(names):] + names[:r % len(names)]:
                for _ in range(n):
                    t0 = time.perf_counter()
                    kinds[k]()
                    times[k].append((time.perf_counter() - t0) * 1000)
        p50 = {k: statistics.median(v) for k, v in times.items()}
        same, stock = p50["zmq kernelbox's kernel"], p50["zmq stock ipykernel"]
        print(f"trivial cell `x = i; x + 1`, {rounds} rounds x {n} calls, interleaved; p50 ms and ratio:")
        for k in names:
            print(f"  {k:24s} {p50[k]:6.2f} ms   vs stock {p50[k] / stock:.2f}x   vs same kernel {p50[k] / same:.2f}x")
        print(f"  the keep-alive client opened {c.connections_opened} connection(s) for all its calls")
    finally:
        for km, kc in kms:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
        s.cleanup()


if __name__ == "__main__":
    main()
