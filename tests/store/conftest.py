"""Fixtures for the store tests: every test that takes ``store`` or ``db_url`` (``tests/conftest.py``)
runs twice, on a fresh SQLite file and on a fresh schema of a real PostgreSQL."""

from __future__ import annotations

from typing import Iterator

import pytest

from rota.store import Store
from storekit import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(db_url, clock) -> Iterator[Store]:
    with Store.open(db_url, clock=clock) as s:
        yield s
