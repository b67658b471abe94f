"""The fixtures that run examples/serving/bigram_lm.py (``bigramkit``): ``bigram_server``, one
per module, and ``start_server``, servers of a test's own with its own options."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from bigramkit import BigramServer, Servers  # noqa: E402


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., BigramServer]]:
    """A function that starts a server of its own (see ``Servers.start``)."""
    servers = Servers(tmp_path)
    yield servers.start
    servers.close()


@pytest.fixture(scope="module")
def bigram_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BigramServer]:
    """One server for a module's tests: models ``tiny`` and ``other``, 32-float embeddings."""
    servers = Servers(tmp_path_factory.mktemp("bigram"))
    yield servers.start("--model", "tiny", "--model", "other", "--embedding-dim", "32")
    servers.close()
