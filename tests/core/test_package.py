"""``rota.core``'s ``__init__`` loads its names when first asked for: importing the package, or
its ``shortforms`` (what the fast path of ``rota ps`` reads), loads none of the domain model,
and every name it offers is the one its module defines."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from importlib import import_module
from pathlib import Path

import pytest

import rota.core

INIT = Path(rota.core.__file__)


def core_modules_after(code: str) -> list[str]:
    probe = (f"import sys, json\n{code}\n"
             f"print(json.dumps(sorted(m for m in sys.modules if m.startswith('rota.core')"
             f" or m == 'dataclasses')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.splitlines()[-1])


def declared() -> dict[str, str]:
    """name -> module, as the ``if TYPE_CHECKING:`` block of ``__init__`` imports them."""
    out = {}
    for node in ast.walk(ast.parse(INIT.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rota.core."):
            out.update({a.name: node.module for a in node.names})
    return out


@pytest.mark.parametrize("code, modules", [
    ("import rota.core", ["rota.core"]),
    ("from rota.core.shortforms import duration", ["rota.core", "rota.core.shortforms"]),
    ("from rota.core import InvalidSpec", ["rota.core", "rota.core.errors"]),
], ids=["package", "shortforms", "one-name"])
def test_importing_loads_only_what_is_asked_for(code, modules):
    assert core_modules_after(code) == modules


def test_every_name_is_the_one_its_module_defines():
    names = declared()
    assert sorted(names) == sorted(rota.core.__all__)
    for name, module in names.items():
        assert getattr(rota.core, name) is getattr(import_module(module), name), name


def test_a_name_it_does_not_offer_is_an_attribute_error_and_submodules_still_import():
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        rota.core.Nothing  # noqa: B018
    from rota.core import Job, jobwords
    assert jobwords.gpus({"request": {"gpu": {"count": 0, "share": 0}}, "replicas": 1}) == "-"
    assert Job.__module__ == "rota.core.jobs"
