"""The research demo in Python: a coordinator and a data_analyst agent, through kernelbox's
Python client and its ``sandbox_execute`` tool, on the Go demo's data and cells.

    /usr/bin/python3 examples/research_demo_py/demo.py [--server URL] [--backend local|docker]

Without --server it starts a ``kernelbox serve`` of its own (the binary from
$KERNELBOX_BIN, else built with ``go build``) in a temporary directory, with the
``analyst`` template (pandas and matplotlib preloaded, one warm kernel) and the built-in
policy whose working directory is a fresh project directory holding the CSV and a decoy
SSH key. The analyst runs the six cells of ``examples/research_demo/cells`` in one
stateful session: the CSV is read once, the decoy key is refused by the policy, and the
report and plot come back as artifacts.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

import kernelbox  # noqa: E402
from kernelbox import tools  # noqa: E402

QUESTION = "Which model gives the best accuracy per parameter on ImageNet, and how has that changed over the years?"
CELLS = os.path.join(REPO, "examples", "research_demo", "cells")
CSV = os.path.join(REPO, "examples", "research_demo", "data", "benchmarks.csv")
DECOY = ("-----BEGIN OPENSSH PRIVATE KEY-----\n"
         "kernelbox research demo decoy: not a key. The permission policy must refuse to stage it.\n"
         "-----END OPENSSH PRIVATE KEY-----\n")
TEMPLATE = {"name": "analyst", "kernel": "python3", "warm": 1,
            "description": "pandas as pd and matplotlib.pyplot as plt already imported, for tabular analysis and charts",
            "preload": "import pandas as pd\nimport matplotlib.pyplot as plt"}

# (title, cell file, inputs relative to the project, must be denied)
PLAN = [
    ("load benchmarks.csv into a DataFrame", "1_load.py", ["benchmarks.csv"], False),
    ("inspect the table", "2_inspect.py", [], False),
    ("compute top-1 % per million parameters, best overall and per year", "3_compute.py", [], False),
    ("try to stage the project's .ssh/id_rsa (a decoy the policy must refuse)", "4_stage_key.py",
     [".ssh/id_rsa"], True),
    ("plot accuracy vs. parameters and the best per year", "5_plot.py", [], False),
    ("write the report", "6_report.py", [], False),
]


class Lab:
    """A kernelbox serve of the demo's own, with its project directory."""

    def __init__(self, backend: str, root: str):
        self.root = root
        self.project = os.path.join(root, "project")
        os.makedirs(os.path.join(self.project, ".ssh"))
        shutil.copyfile(CSV, os.path.join(self.project, "benchmarks.csv"))
        with open(os.path.join(self.project, ".ssh", "id_rsa"), "w") as f:
            f.write(DECOY)
        with open(os.path.join(root, "templates.json"), "w") as f:
            json.dump({"templates": [TEMPLATE]}, f)
        self.url = "unix:" + os.path.join(root, "kb.sock")
        self.tmp = tempfile.mkdtemp(prefix="kbd", dir="/tmp")  # short: the kernels' unix sockets live there
        env = dict(os.environ, TMPDIR=self.tmp)
        args = [binary(), "serve", "--backend", backend, "--listen", self.url, "--workspace",
                os.path.join(root, "ws"), "--workdir", self.project, "--templates",
                os.path.join(root, "templates.json"), "--no-dashboard", "--log-level", "warn",
                # A one-shot demo: its sessions end with it (serve's default on a stop
                # is to keep docker sessions for the next start).
                "--on-stop", "close"]
        if backend == "local":
            args += ["--python", "/usr/bin/python3"]
        self.log = open(os.path.join(root, "serve.log"), "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=self.log, env=env, start_new_session=True)
        c = kernelbox.Client(self.url, timeout=5)
        deadline = time.monotonic() + 60
        while True:
            try:
                c.health()
                break
            except kernelbox.TransportError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("demo: kernelbox serve did not start; see " + self.log.name)
                time.sleep(0.05)
        c.close()

    def close(self) -> None:
        """Stop serve (it closes its kernels) and remove its temporary directory."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def binary() -> str:
    """Return the kernelbox binary: $KERNELBOX_BIN, else one built from this repository."""
    if os.environ.get("KERNELBOX_BIN"):
        return os.environ["KERNELBOX_BIN"]
    d = tempfile.mkdtemp(prefix="kbdemo-bin-")
    atexit.register(shutil.rmtree, d, True)
    out = os.path.join(d, "kernelbox")
    env = dict(os.environ, PATH=os.environ.get("PATH", "") + ":/usr/local/go/bin")
    subprocess.run(["go", "build", "-o", out, "./cmd/kernelbox"], cwd=REPO, env=env, check=True)
    return out


def wait_warm(c: kernelbox.Client, limit: float = 180) -> str:
    """Wait for the analyst template's warm kernel; say how long it took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if any(t.name == "analyst" and t.warm_ready > 0 for t in c.templates()):
            return f"its warm kernel, past the preload, was ready after {time.monotonic() - t0:.1f} s"
        time.sleep(0.1)
    return f"no warm kernel after {limit:.0f} s: the first call starts one"


def analyst(c: kernelbox.Client, session: str, project: str, out=print) -> dict:
    """Run the plan in one session; return what the coordinator needs."""
    answer, artifacts, steps = "", [], 0
    for i, (title, cell, inputs, want_denied) in enumerate(PLAN, 1):
        with open(os.path.join(CELLS, cell)) as f:
            code = f.read()
        if i == 1:
            code = (f"QUESTION = {json.dumps(QUESTION)}\n"
                    "PRELOADED = sorted(n for n in ('pd', 'plt') if n in globals())\n") + code
        paths = [os.path.join(project, p) for p in inputs]
        out(f"[{i}/{len(PLAN)}] data_analyst: {title}")
        out(f"      sandbox_execute(session_id={session!r}, inputs={inputs})")
        steps += 1
        try:
            r = c.execute(session, code, inputs=paths)
        except kernelbox.PermissionDenied as e:
            r = None
            out("      denied: " + e.message)
        if want_denied:
            if r is not None and r.status != "denied":
                raise SystemExit(f"demo: step {i}: the policy let {inputs} through; it must refuse it")
            if r is not None:
                out("      denied: " + (r.error.evalue if r.error else "by the policy"))
            out("      the call was refused before anything was staged or run; the analyst carries on")
            continue
        assert r is not None
        out("      " + tools.format_result(r, 1500).replace("\n", "\n      ").rstrip())
        if r.status != "ok":
            raise SystemExit(f"demo: step {i} ({title}) ended with status {r.status}")
        artifacts += [a.path for a in r.artifacts]
        for line in r.stdout.splitlines():
            if line.startswith("answer: "):
                answer = line[len("answer: "):]
    return {"answer": answer, "artifacts": artifacts, "steps": steps}


def main(argv: Optional[List[str]] = None, out=print) -> dict:
    """Run the demo; return the analyst's finding (the test checks it)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", help="use this kernelbox server (its policy must allow the project's CSV)")
    ap.add_argument("--backend", default="local", choices=["local", "docker"])
    ap.add_argument("--dir", help="directory for the demo's server and project (default: a temporary one)")
    a = ap.parse_args(argv)
    root = a.dir or tempfile.mkdtemp(prefix="kbdemo-")
    lab = None
    try:
        if a.server:
            url, project = a.server, os.path.join(root, "project")
            os.makedirs(os.path.join(project, ".ssh"), exist_ok=True)
            shutil.copyfile(CSV, os.path.join(project, "benchmarks.csv"))
        else:
            lab = Lab(a.backend, root)
            url, project = lab.url, lab.project
        c = kernelbox.Client(url)
        session = "data_analyst-" + time.strftime("%Y%m%d-%H%M%S")
        c.create_session(session, "analyst")
        out(f"coordinator: {QUESTION}")
        out(f"  server    {url}")
        out(f"  project   {project} (the policy's working directory: inputs are read from here)")
        out(f"  template  analyst: {TEMPLATE['description']}; {wait_warm(c)}")
        out("coordinator: delegating the analysis to data_analyst")
        f = analyst(c, session, project, out)
        out(f"coordinator: data_analyst answered: {f['answer']}")
        out("coordinator: artifacts:\n  " + "\n  ".join(f["artifacts"]))
        summary = [p for p in f["artifacts"] if p.endswith("summary.json")]
        f["summary"] = {}
        if summary:
            with open(summary[0]) as fh:
                f["summary"] = json.load(fh)
        c.close_session(session)
        c.close()
        return f
    finally:
        if lab:
            lab.close()
        if not a.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
