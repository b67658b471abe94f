"""Fixtures for backend tests: a local backend over a temporary data directory, a node with
four virtual H100s, and a teardown that kills every process a test started (supervisors and
replica groups found under the data directory)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from builders import node  # noqa: E402
from rota.backends.local import LocalBackend  # noqa: E402
from rota.core import Node  # noqa: E402
from backend_support import NODE, kill_everything_under  # noqa: E402


@pytest.fixture
def n1() -> Node:
    return node(NODE).gpus(4, "H100-80GB").build()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data"
    yield path
    kill_everything_under(path)


@pytest.fixture
def backend(data_dir: Path, n1: Node) -> LocalBackend:
    return LocalBackend(data_dir, node=n1)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path
