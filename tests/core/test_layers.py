"""The dependency direction of DESIGN.md holds in the sources, for every package: core <-
scheduler <- control and simulator; store and backends depend on core only; the simulator never
imports api or control; api depends on control, store and spec, never on the scheduler or a
backend; the HTTP client knows nothing of the server; the CLI never opens the store;
composition (``server``) never imports the CLI.

Sources are parsed (AST), not imported, so an import on a path no test runs fails here too;
imports inside functions count as well."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rota

ROOT = Path(rota.__file__).parent
# package -> the rota packages it may import (besides itself)
ALLOWED = {
    "core": set(),
    "scheduler": {"core"},
    "store": {"core"},
    "backends": {"core"},
    "simulator": {"core", "scheduler", "spec"},
    "client": {"core"},
    # job files and policies are read into the scheduler's values
    "spec": {"core", "scheduler"},
    "control": {"core", "scheduler", "store", "backends"},
    # the API reads the store and asks control what needs the scheduler (queue usage)
    "api": {"core", "store", "spec", "control"},
    # the CLI talks to the API through the client, and runs ``rota up`` through composition
    # (``server``) and control's local setup (data directory, credentials, lock)
    "cli": {"core", "client", "spec", "scheduler", "simulator", "server", "control"},
    # composition: the one package that knows every part of a control plane (not the CLI)
    "server": {"core", "scheduler", "spec", "store", "backends", "control", "api"},
}


def rota_imports(path: Path) -> set[str]:
    """The rota packages (``rota.X``) a module imports."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        out |= {n.split(".")[1] for n in names if n.startswith("rota.") and n.count(".") >= 1}
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_layers_below_it(package):
    wrong = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        extra = rota_imports(path) - ALLOWED[package] - {package}
        if extra:
            wrong[str(path.relative_to(ROOT))] = sorted(extra)
    assert wrong == {}


def test_the_scan_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from rota.control import loop\n    import rota.api.app\n")
    assert rota_imports(module) == {"control", "api"}


def test_every_package_has_its_layers_listed():
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(ALLOWED)
