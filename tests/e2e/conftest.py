"""The ``rota_server`` fixture: a real ``rota up`` in a subprocess, on loopback.

It runs ``rota up --port 0 --data-dir TMP --gpus 4xH100-80GB`` with ``XDG_CONFIG_HOME`` and
``XDG_DATA_HOME`` pointed at temporary directories (never the real home), waits for the
credentials file and for ``/v1/whoami`` to answer, and at the end kills the server's process
group and every job process it started (supervisors run in sessions of their own, so they are
found through the data directory, as a test of crash safety needs them to survive the server).

``RotaServer`` gives ``url``, ``token``, ``data_dir``, ``env`` (to run ``rota`` commands
against it), ``client()`` (an ``httpx.Client`` with the operator token), ``restart()`` (SIGTERM,
wait, start again), ``kill9()`` (``kill -9`` of the control plane, jobs left running) and
``start()`` (after ``kill9``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from serverkit import RotaServer  # noqa: E402


@pytest.fixture
def rota_server(tmp_path: Path) -> Iterator[RotaServer]:
    server = RotaServer(tmp_path)
    try:
        server.start()
        yield server
    finally:
        server.close()
