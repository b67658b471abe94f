"""Every package's docstring names every one of its modules and sub-packages, and nothing else.

A reader opening ``src/rota/<package>/__init__.py`` finds the map of the package there: one
list item per module, as ``rota.api`` writes it::

    - ``state``: ``Api``, what every router reads ...;

An item may name several modules before its colon (``- ``types``, ``errors``, ``load``: ...``)
and a name may be written in full (``- ``rota.core``: ...``). The packages are found by walking
the source tree, so a new package or module is covered without touching this test. The sources
are parsed, not imported: a package that loads its modules lazily stays lazy.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import rota

ROOT = Path(rota.__file__).parent

# "- ``a``: ...", "- ``a``, ``b``: ...", "- ``a`` / ``b``: ...", "- ``a`` and ``b``: ..."
ITEM = re.compile(r"^\s*-\s+((?:``[\w.]+``\s*(?:,|/|and)?\s*)+):", re.MULTILINE)
NAME = re.compile(r"``([\w.]+)``")


def packages() -> list[Path]:
    return sorted(p.parent for p in ROOT.rglob("__init__.py") if "__pycache__" not in p.parts)


def dotted(package: Path) -> str:
    return ".".join(("rota", *package.relative_to(ROOT).parts))


def members(package: Path) -> set[str]:
    """The modules (``*.py`` but ``__init__`` and ``__main__``) and sub-packages of ``package``."""
    modules = {p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")}
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")}
    return modules | subpackages


def listed(package: Path) -> set[str]:
    """The names the items of the package's docstring begin with, relative to the package."""
    source = (package / "__init__.py").read_text()
    doc = ast.get_docstring(ast.parse(source)) or ""
    prefix = dotted(package) + "."
    names = set()
    for head in ITEM.findall(doc):
        for name in NAME.findall(head):
            names.add(name.removeprefix(prefix))
    return names


def test_the_walk_finds_the_nested_packages():
    found = {dotted(p) for p in packages()}
    assert {"rota", "rota.api.dashboard", "rota.backends.kube", "rota.scheduler.plugins",
            "rota.store.migrations.versions"} <= found


def test_the_item_form_is_read_as_documented():
    doc = ('"""Intro naming ``prose`` only.\n\n- ``a``: one;\n- ``b``, ``c``: two;\n'
           '- ``rota.x.d`` / ``rota.x.e``: full names;\n- ``/ui/``: a path, no module;\n'
           '- its input lives in ``core``;\n"""')
    prefix = "rota.x."
    heads = ITEM.findall(ast.get_docstring(ast.parse(doc)))
    names = {n.removeprefix(prefix) for head in heads for n in NAME.findall(head)}
    assert names == {"a", "b", "c", "d", "e"}


@pytest.mark.parametrize("package", packages(), ids=dotted)
def test_package_docstring_lists_its_modules(package: Path):
    have, named = members(package), listed(package)
    missing, stale = sorted(have - named), sorted(named - have)
    where = package / "__init__.py"
    problems = []
    if missing:
        problems.append(
            f"modules not listed as items of the docstring of {where}: {', '.join(missing)}. "
            f"Add one list item each, starting '- ``name``: what it holds;' (see "
            f"rota/api/__init__.py), written from the module's own docstring and code; a name "
            f"in the middle of an item does not count.")
    if stale:
        problems.append(
            f"the docstring of {where} lists modules that do not exist: {', '.join(stale)}. "
            f"Remove those items, or rename them to the module that holds that code now.")
    assert not problems, f"{dotted(package)}: " + " And ".join(problems)
