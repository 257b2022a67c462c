"""The trivial cell's floor inside a container: jupyter_client straight over ZMQ to a
kernel in the same container (no Jupyter Server, no kernelbox), p50 of 40 calls.

Run in the kernel image under a runtime, e.g. gVisor (README, "gVisor"):

    docker run --rm --runtime runsc --network none --user 1000:1000 -e HOME=/tmp \\
        -v "$PWD/bench:/bench:ro" kernelbox/kernel:latest python3 /bench/sandbox_floor.py tcp

The argument is the kernel's channel transport: tcp (loopback) or ipc (unix sockets).
"""
import statistics
import sys
import time

import jupyter_client


def main(transport):
    km = jupyter_client.KernelManager(kernel_name="python3")
    km.transport = transport
    if transport == "ipc":
        km.ip = "/tmp/floor-ipc"
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        took = []
        for i in range(40):
            t0 = time.perf_counter()
            kc.execute_interactive("x = %d; x + 1" % i, output_hook=lambda m: None, timeout=30)
            took.append(time.perf_counter() - t0)
        print("%s: trivial cell p50 %.2f ms, min %.2f ms" % (transport, statistics.median(took) * 1000, min(took) * 1000))
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tcp")
