"""The Slurm fixture's own start (tests/slurm/fixture/start.sh): ports in the kernel's ephemeral
range are refused before anything starts, and a start that fails half-way stops every daemon it
had started. Each runs a second cluster in its own directory and ports, beside the shared one.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

FIXTURE = Path(__file__).parent / "fixture"
# the shared cluster running means Slurm's packages are installed and this runs as root
pytestmark = pytest.mark.usefixtures("slurm_env")


@pytest.fixture
def cluster_dir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="rota-slurm-start-"))
    root.chmod(0o755)  # munged wants its socket's directories searchable by all
    try:
        yield root / "cluster"
    finally:
        subprocess.run([str(FIXTURE / "stop.sh"), "--purge"], capture_output=True,
                       env={**os.environ, "ROTA_SLURM_DIR": str(root / "cluster")})
        shutil.rmtree(root, ignore_errors=True)


def start(cluster: Path, **settings: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROTA_SLURM_DIR": str(cluster), "ROTA_SLURM_NO_APT": "1",
           "ROTA_SLURM_ACCOUNTING": "0", **settings}
    return subprocess.run([str(FIXTURE / "start.sh")], env=env, capture_output=True, text=True,
                          timeout=300)


def marked(cluster: Path) -> list[int]:
    """The processes that carry the fixture's marker for ``cluster``."""
    mark = f"ROTA_SLURM_FIXTURE={cluster}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_ports_in_the_ephemeral_range_are_refused_before_anything_starts(cluster_dir):
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    done = start(cluster_dir, ROTA_SLURM_PORT=str(low + 100))
    assert done.returncode != 0
    assert "ephemeral range" in done.stderr and "ROTA_SLURM_PORT" in done.stderr
    assert not cluster_dir.exists() and marked(cluster_dir) == []


def test_a_start_that_fails_stops_the_daemons_it_started(cluster_dir):
    port = 26917
    with socket.socket() as taken:  # slurmctld cannot listen: the start fails after munged
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("0.0.0.0", port))
        taken.listen()
        done = start(cluster_dir, ROTA_SLURM_PORT=str(port), ROTA_SLURM_NODE_PORT="27101")
    assert done.returncode != 0, done.stderr
    assert "the start failed: stopping what it started" in done.stderr
    assert "stopped munged" in done.stderr
    assert marked(cluster_dir) == []
