# Regenerates the test notebooks in this directory (run with a Python that has nbformat,
# e.g. /usr/bin/python3 make_fixtures.py .), then refresh the golden files with
# `go test ./notebook -run TestRunMatchesNbclient -args -update`.
import json, os, sys, nbformat
from nbformat.v4 import new_notebook, new_code_cell, new_markdown_cell, new_raw_cell
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
KS = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
      "language_info": {"name": "python"}}
def code(src, tags=None, **kw):
    c = new_code_cell(src, **kw)
    if tags: c.metadata["tags"] = tags
    return c
def save(name, cells, meta=None):
    nb = new_notebook(cells=cells, metadata=dict(KS, **(meta or {})))
    # deterministic ids
    for i, c in enumerate(nb.cells):
        c.id = f"{name}-{i}"
    nbformat.validate(nb)
    nbformat.write(nb, os.path.join(out, name + ".ipynb"))

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

save("streams", [
    new_markdown_cell("Streams: stdout and stderr interleaved."),
    code('import sys\nprint("one", flush=True)\nprint("two", file=sys.stderr, flush=True)\nprint("three", flush=True)\nprint("four", file=sys.stderr, flush=True)\nprint("five")'),
    code('for i in range(3):\n    print(i)\nsys.stderr.write("done\\n")'),
    code('print("no newline", end="")'),
    code('x = 41\nx + 1'),
])
save("errors", [
    code('x = 1'),
    code('1/0', tags=["raises-exception"]),
    code('class Boom(Exception):\n    pass\n\nraise Boom(object())', tags=["raises-exception"]),
    code('def f():\n    raise ValueError("inner")\n\nf()', tags=["raises-exception"]),
    code('print("still running", x)'),
])
save("rich", [
    code('import base64\nfrom IPython.display import HTML, Image, Markdown, display'),
    code('HTML("<b>bold</b> &amp; <i>it</i>")'),
    code(f'display(Markdown("# Title"))\ndisplay(Image(data=base64.b64decode("{PNG}")))'),
    code('class Thing:\n    pass\n\nThing()'),
    code('{"a": [1, 2], "b": "x"}'),
    code('display({"text/plain": "custom", "application/json": {"k": [1, 2]}}, raw=True)'),
    code('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})'),
])
save("clear_output", [
    code('from IPython.display import clear_output, display\nprint("before")\nclear_output()\nprint("after")'),
    code('for i in range(5):\n    clear_output(wait=True)\n    print(f"step {i}", flush=True)'),
    code('print("stays")\nclear_output(wait=True)'),
    code('display("x")\nclear_output(wait=True)\ndisplay("y")'),
])
save("display_updates", [
    code('from IPython.display import HTML, clear_output, display, update_display\nh = display("first", display_id=True)'),
    code('display(HTML("<p>v1</p>"), display_id="mine")'),
    code('print("between")'),
    code('h.update("first, updated")\nupdate_display(HTML("<p>v2</p>"), display_id="mine")'),
    code('display("again", display_id="mine")'),
    code('g = display("temp", display_id="gone")\nclear_output()'),
    code('update_display("ghost", display_id="gone")'),
    code('h2 = display("count 0", display_id=True)\nfor i in range(1, 4):\n    h2.update(f"count {i}")'),
])
save("unicode", [
    new_markdown_cell("Ünïcödé ✓ — 日本語 🎉"),
    code('s = "héllo ✓ 日本語 🎉"\nprint(s)\ns'),
    code('print("tab\\there, line\\u2028separator")'),
    code('from IPython.display import HTML\nHTML("<p>&lt;tag&gt; & \\"quotes\\" \'single\'</p>")'),
    code('len("🎉"), "🎉".encode()'),
    code('raise RuntimeError("ошибка ✗")', tags=["raises-exception"]),
])
save("parameters", [
    new_markdown_cell("Parameters"),
    code('alpha = 0.5\nname = "default"\nflag = False\nitems = []\nconfig = {}\nnothing = "x"', tags=["parameters"]),
    code('print(repr(alpha), repr(name), repr(flag), repr(items), repr(config), repr(nothing))'),
    code('alpha * 2'),
])
save("fail", [
    code('x = 1'),
    code('print("before")\nraise ValueError("bad value")'),
    code('print("never")'),
])
# empty: nbformat 4.4, string sources, stale outputs on a skipped cell, unknown metadata
nb = {
 "nbformat": 4, "nbformat_minor": 4,
 "metadata": dict(KS, custom={"nested": [1, {"z": True}], "s": "<&>"}),
 "cells": [
  {"cell_type": "markdown", "metadata": {}, "source": "# Empty cells"},
  {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": ""},
  {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": "   \n\t"},
  {"cell_type": "code", "execution_count": None, "metadata": {"myext": {"keep": [1, 2]}}, "outputs": [], "source": "print(\"ran\")"},
  {"cell_type": "code", "execution_count": 7, "metadata": {"tags": ["skip-execution"]},
   "outputs": [{"output_type": "stream", "name": "stdout", "text": ["stale\n"]}], "source": "print(\"should not run\")"},
  {"cell_type": "raw", "metadata": {}, "source": "raw text"},
  {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": ["1 +", " 1"]},
 ],
}
nbformat.validate(nbformat.from_dict(nb))
with open(os.path.join(out, "empty.ipynb"), "w") as f:
    json.dump(nb, f, indent=1, sort_keys=True, ensure_ascii=False)
    f.write("\n")
