"""The package's shape: no import cycle between its modules (top-level or inside
functions), and star imports that export only the names they mean to."""

from __future__ import annotations

import ast
import os
import unittest

import kbserve  # noqa: F401  (puts the package on the path)

import kernelbox
import kernelbox.deepagents
import kernelbox.errors

PKG = os.path.join(kbserve.PYDIR, "kernelbox")


def module_name(path: str) -> str:
    rel = os.path.relpath(path, kbserve.PYDIR)[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def imports(path: str, name: str) -> set:
    """The package modules the module at path imports, anywhere in it."""
    pkg = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.ImportFrom):
            base = pkg
            for _ in range(node.level - 1):
                base = base.rsplit(".", 1)[0]
            mod = (base + "." + node.module if node.module else base) if node.level else (node.module or "")
            for a in node.names:  # "from . import _kernel" names a module
                out.add(mod + "." + a.name)
            out.add(mod)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m == "kernelbox" or m.startswith("kernelbox.")}


class PackageTest(unittest.TestCase):
    def test_no_import_cycle(self):
        graph = {}
        for d, _, files in os.walk(PKG):
            for f in files:
                if f.endswith(".py"):
                    p = os.path.join(d, f)
                    graph[module_name(p)] = imports(p, module_name(p))
        for m in graph:  # an import of a package is an import of its __init__, which is not a cycle to its parts
            graph[m] = {x for x in graph[m] if x in graph and x != m and not m.startswith(x + ".")}
        state = {}

        def visit(m, stack):
            state[m] = 1
            for x in sorted(graph[m]):
                if state.get(x) == 1:
                    self.fail("import cycle: " + " -> ".join(stack[stack.index(x):] + [x]))
                if x not in state:
                    visit(x, stack + [x])
            state[m] = 2

        for m in sorted(graph):
            if m not in state:
                visit(m, [m])
        self.assertIn("kernelbox.deepagents._files", graph, "the walk found the subpackage")

    def test_star_exports(self):
        for leaked in ("annotations", "Dict", "Optional", "Tuple", "Type"):
            self.assertFalse(hasattr(kernelbox, leaked), f"kernelbox exports {leaked}")
        self.assertIn("NotFound", kernelbox.errors.__all__)
        self.assertIs(kernelbox.NotFound, kernelbox.errors.NotFound)
        for mod in (kernelbox, kernelbox.errors, kernelbox.deepagents):
            for n in mod.__all__:
                self.assertTrue(hasattr(mod, n), f"{mod.__name__}.__all__ names {n}, which it lacks")
        for name in ("KernelboxSandbox", "KernelboxSandboxClient", "KernelboxProvider", "SandboxNotFoundError"):
            self.assertIn(name, kernelbox.deepagents.__all__)


if __name__ == "__main__":
    unittest.main()
