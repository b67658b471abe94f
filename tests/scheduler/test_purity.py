"""rota.core and rota.scheduler are pure: no I/O, no clock, no unseeded randomness.

The sources are parsed (AST), not imported, so a forbidden import fails here even on a path
no test runs. Randomness is allowed only through ``random.Random(seed)`` instances.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rota

FORBIDDEN = {
    # operating system, files, processes, networks
    "os", "sys", "io", "pathlib", "shutil", "tempfile", "glob", "socket", "ssl", "select",
    "selectors", "subprocess", "signal", "mmap", "fcntl",
    "http", "urllib", "requests", "httpx", "aiohttp", "websockets",
    # concurrency and event loops
    "asyncio", "threading", "multiprocessing", "concurrent", "anyio",
    # clocks
    "time", "datetime", "zoneinfo",
    # databases, web frameworks, backends, file formats read from disk
    "sqlite3", "sqlalchemy", "alembic", "psycopg", "psycopg2", "fastapi", "starlette",
    "uvicorn", "kubernetes", "pynvml", "yaml", "logging",
    # rota's own impure layers
    "rota.store", "rota.api", "rota.control", "rota.backends", "rota.cli", "rota.web",
    "rota.simulator",
}
PURE_PACKAGES = ("core", "scheduler")
ROOT = Path(rota.__file__).parent


def _forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f + ".") for f in FORBIDDEN)


def violations(source: str) -> list[str]:
    """Forbidden imports and module-level ``random`` calls in ``source``."""
    found = []
    tree = ast.parse(source)
    random_names = {"random"}  # names bound to the random module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _forbidden(alias.name):
                    found.append(f"line {node.lineno}: import {alias.name}")
                if alias.name == "random":
                    random_names.add(alias.asname or "random")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _forbidden(node.module):
                found.append(f"line {node.lineno}: from {node.module} import ...")
            if node.module == "random":
                found += [f"line {node.lineno}: from random import {a.name}"
                          for a in node.names if a.name != "Random"]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in random_names and node.attr != "Random":
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr} (unseeded)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "__import__":
            found.append(f"line {node.lineno}: __import__")
    return found


SOURCES = sorted(p for pkg in PURE_PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_the_pure_packages_have_sources():
    assert len(SOURCES) >= 10


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pure_module_does_no_io(path):
    assert violations(path.read_text()) == []


@pytest.mark.parametrize("source,bad", [
    ("import os", True),
    ("import os.path as p", True),
    ("from datetime import datetime", True),
    ("import time\nt = time.time()", True),
    ("from sqlalchemy.orm import Session", True),
    ("import asyncio", True),
    ("from rota.store import db", True),
    ("import random\nx = random.random()", True),
    ("import random\nrandom.shuffle([])", True),
    ("import random as r\nr.choice([1])", True),
    ("from random import shuffle", True),
    ("import random\nrng = random.Random(0)\nrng.random()", False),
    ("from random import Random\nRandom(3).shuffle([])", False),
    ("import math\nfrom collections import defaultdict", False),
    ("from rota.core import Job", False),
    ("import timeit_like_name_not_time", False),
], ids=lambda v: repr(v) if isinstance(v, str) else str(v))
def test_the_checker_itself(source, bad):
    assert bool(violations(source)) is bad
