"""Fixtures for the control loop tests: a real store (SQLite) and a real local backend over a
temporary data directory, four virtual H100s, a hand-moved clock, and a teardown that kills
every process a test started."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "backends"))

from backend_support import kill_everything_under  # noqa: E402
from controlkit import FakeClock, seeded_store  # noqa: E402
from rota.backends.gpus import parse_virtual_gpus  # noqa: E402
from rota.backends.local import LocalBackend  # noqa: E402
from rota.control import ControlLoop  # noqa: E402
from rota.core import Node  # noqa: E402
from rota.scheduler import build_policy  # noqa: E402
from rota.store import Store  # noqa: E402


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data"
    path.mkdir()
    yield path
    kill_everything_under(path)


@pytest.fixture
def backend(data_dir: Path) -> LocalBackend:
    node = Node("n1", 16_000, 64 * 1024, parse_virtual_gpus("4xH100-80GB"))
    return LocalBackend(data_dir, node=node)


@pytest.fixture
def store(data_dir: Path, clock: FakeClock, backend: LocalBackend) -> Iterator[Store]:
    with Store.open(data_dir, clock=clock.now) as s:
        yield seeded_store(s, backend)


@pytest.fixture
def loop(store: Store, backend: LocalBackend, data_dir: Path,
         clock: FakeClock) -> Iterator[ControlLoop]:
    loop = ControlLoop(store, backend, build_policy("default"), data_dir, clock=clock)
    yield loop
    loop.stop()
