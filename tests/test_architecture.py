"""Imports point one way (model <- io, static, runtime, analysis, trace <- commands <- cli), and the heavy
edges (llvmlite, mpi4py, otf2) are imported lazily, so `import scalgraph...` needs no compiler or MPI."""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

PKG = pathlib.Path(__file__).resolve().parent.parent / "scalgraph"
LAYER = {"errors": 0, "model": 0, "io": 1, "static": 1, "runtime": 1, "analysis": 1, "trace": 1,
         "commands": 2, "cli": 3, "__init__": 0}
HEAVY = {"llvmlite", "mpi4py", "otf2"}


def _module_imports(path: pathlib.Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = set(id(n) for n in tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        else:
            continue
        for name in names:
            yield name, id(node) in top_level


def _layer_of(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG).parts
    return rel[0].removesuffix(".py")


def test_package_layers_import_downwards_only():
    bad = []
    for path in PKG.rglob("*.py"):
        mine = _layer_of(path)
        for name, _ in _module_imports(path):
            parts = name.split(".")
            if parts[0] != "scalgraph" or len(parts) < 2:
                continue
            theirs = parts[1]
            if theirs in LAYER and mine in LAYER and LAYER[theirs] > LAYER[mine]:
                bad.append(f"{path.relative_to(PKG.parent)} imports {name}")
    assert not bad, "\n".join(bad)


def test_heavy_dependencies_are_imported_lazily():
    bad = [f"{p.relative_to(PKG.parent)} imports {n} at module level"
           for p in PKG.rglob("*.py") for n, top in _module_imports(p) if top and n.split(".")[0] in HEAVY]
    assert not bad, "\n".join(bad)


def test_importing_every_module_loads_no_heavy_dependency():
    mods = []
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods.append(".".join(parts))
    code = ("import importlib, sys\n"
            f"for m in {sorted(mods)!r}: importlib.import_module(m)\n"
            f"print(sorted(set(sys.modules) & set({sorted(HEAVY)!r})))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
