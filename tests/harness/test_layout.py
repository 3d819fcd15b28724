"""The package's shape: one `dpgym` import name, a core without import cycles, and plugins that use
only the public API."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "harness"
# What a plugin may import from dpgym: the contract, the privacy toolkit, the conformance checks, the
# first-party blocks.
PUBLIC = ("dpgym", "dpgym.privacy", "dpgym.testing")


def module_name(path: Path) -> str:
    """The import name of a file under harness/ (dpgym) or plugins/ (dpgym.plugins)."""
    top, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = ["dpgym", *(["plugins"] if top == "plugins" else []), *rest]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path) -> list[tuple[str, list[str], int]]:
    """(module, imported names, line) of every import that runs, wherever it stands in the file;
    imports under `if TYPE_CHECKING:` never run and are left out. A scaffold template is read with
    its placeholders filled in."""
    tree = ast.parse(re.sub(r"\{\{(\w+)\}\}", r"\1", path.read_text()))
    skipped = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
               and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
               for statement in block.body for node in ast.walk(statement)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, [alias.name for alias in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno) for alias in node.names)
    return found


def core_graph() -> dict[str, set[str]]:
    """Which core module imports which: `from package import x` counts as importing package.x where x
    is a submodule, else as importing the package's __init__."""
    modules = {module_name(path): path for path in CORE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for module, names, _ in runtime_imports(path):
            if module in modules:
                graph[name].update(f"{module}.{n}" if f"{module}.{n}" in modules else module for n in names or [""])
        graph[name].discard(name)
    return graph


def test_core_modules_import_no_cycle():
    graph, done, cycles = core_graph(), set(), []

    def visit(node: str, trail: list[str]) -> None:
        if node in trail:
            cycles.append(" → ".join(trail[trail.index(node):] + [node]))
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*trail, node])
        done.add(node)

    for start in sorted(graph):
        visit(start, [])
    assert not cycles, "import cycles among the core modules:\n" + "\n".join(sorted(set(cycles)))


def test_the_core_imports_no_plugin():
    offenders = [f"{path.relative_to(ROOT)}:{line} imports {module}" for path in CORE.rglob("*.py")
                 for module, _, line in runtime_imports(path) if module.startswith("dpgym.plugins")]
    assert not offenders, "\n".join(offenders)


def plugin_sources() -> list[Path]:
    return sorted([*(ROOT / "plugins").rglob("*.py"), *(ROOT / "examples").rglob("*.py"),
                   *(CORE / "templates").rglob("*.py.tmpl")])


@pytest.mark.parametrize("path", plugin_sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_plugins_use_only_the_public_api(path):
    imports = [(module, names, line) for module, names, line in runtime_imports(path)
               if module == "dpgym" or module.startswith("dpgym.")]
    wrong = [f"line {line}: from {module} import {', '.join(names)}" for module, names, line in imports
             if not module.startswith("dpgym.plugins") and module not in PUBLIC]
    private = [f"line {line}: {name} from {module}" for module, names, line in imports for name in names
               if name.startswith("_")]
    assert not wrong, f"imports dpgym internals (use `from dpgym import …` or `from dpgym.privacy import …`): {wrong}"
    assert not private, f"imports private names: {private}"


def test_every_public_name_resolves():
    import dpgym

    missing = [name for name in dpgym.__all__ if not hasattr(dpgym, name)]
    assert not missing, missing


def test_the_installed_packages_are_the_source_folders():
    configured = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {module_name(init.parent / "__init__.py") for top in ("harness", "plugins")
               for init in (ROOT / top).rglob("__init__.py")}
    assert configured == folders


@pytest.mark.slow
def test_stray_harness_and_plugins_packages_do_not_shadow_dpgym(tmp_path):
    for stray in ("harness", "plugins"):
        (tmp_path / stray).mkdir()
        (tmp_path / stray / "__init__.py").write_text("raise ImportError('a stray package was imported')\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    listing = subprocess.run([sys.executable, "-m", "dpgym.cli", "list"], capture_output=True, text=True, cwd=tmp_path,
                             env=env, timeout=300)
    assert listing.returncode == 0, listing.stderr
    assert "dp_hflow" in listing.stdout and "adult" in listing.stdout
    for name in ("harness", "plugins"):
        probe = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                               cwd=tmp_path.parent, timeout=60)
        assert "No module named" in probe.stderr, f"a top-level {name!r} package is installed"


def run_directory_names() -> set[str]:
    """Every file and folder name the store gives a run directory, read off the store itself."""
    from dpgym.results.store import RunStore

    store = RunStore(Path("/run"))
    paths = [store.cells, store.manifest_path, store.audits, store.audits_index, store.figures, store.report_path,
             store.outputs_stamp, store.result_path("k"), store.ledger_path("k"), store.synthetic_path("k"),
             store.audit_summary("k"), store.audit_fit("k", 0).parent, *store.outputs()]
    return {p.name for p in paths}


def test_only_the_store_joins_run_directory_paths():
    """The store owns the run directory: a core module that joins one of its names to a path (`out /
    "cells"`, `run_dir / f"compare-{name}.md"`) builds a run-directory path itself, and drifts from it."""
    names, offenders = run_directory_names(), []
    for path in CORE.rglob("*.py"):
        if path == CORE / "results" / "store.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
                continue
            right = node.right
            if isinstance(right, ast.Constant) and isinstance(right.value, str):
                text = right.value
            elif isinstance(right, ast.JoinedStr):
                text = "".join(str(v.value) for v in right.values if isinstance(v, ast.Constant))
            else:
                continue
            if text in names or text.startswith(("compare-", "leaderboard.")):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} joins {text!r}")
    assert not offenders, "build run-directory paths with dpgym.results.store.RunStore:\n" + "\n".join(offenders)
