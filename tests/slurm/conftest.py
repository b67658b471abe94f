"""Fixtures for the Slurm tests.

Pure tests read ``data/``: output of Slurm 22.05's commands captured on the fixture cluster
(``sinfo --json`` with a node down and one drained, ``squeue --all --json`` with GPU, shard,
gang, pending and ended jobs, ``sacct --json`` and its parseable exit codes; ``*-ends*``: the
ways Slurm ends a job, ``test_slurm_end_states``).

Tests that take ``slurm`` (or ``slurm_env``) run against the real cluster of
``tests/slurm/fixture`` (started by ``eval "$(.ci/slurm)"``), found through ``SLURM_CONF``.
Without it they skip, unless ``CI`` is set: then they fail, because CI must test against the
real Slurm. Each test names its Slurm jobs after a fresh rota job id and cancels what it left
behind (``leftovers`` for what a backend submitted).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from requires import required_env
from slurmkit import Slurm


def _cluster_env() -> dict[str, str]:
    conf = required_env("SLURM_CONF", "run `eval \"$(.ci/slurm)\"` to test against the real "
                        "Slurm of tests/slurm/fixture", "Slurm")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_",
                                                                     "SQUEUE_", "SACCT_"))}
    env["SLURM_CONF"] = conf
    return env


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    env = _cluster_env()
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, env=env)
    if ping.returncode != 0:
        pytest.fail(f"SLURM_CONF is set but slurmctld does not answer: {ping.stdout}{ping.stderr}")
    return env


@pytest.fixture
def slurm(slurm_env) -> Iterator[Slurm]:
    cluster = Slurm(dict(slurm_env))
    yield cluster
    if cluster.submitted:
        subprocess.run(["scancel", *map(str, cluster.submitted)], env=cluster.env,
                       capture_output=True)


@pytest.fixture
def job_id() -> str:
    """A rota job id no other test uses, so that Slurm job names never collide."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def data_dir(tmp_path_factory) -> Path:
    """A data directory every account may pass through (as a shared one must be, for jobs
    that run as their owners), removed at the end."""
    base = Path(tempfile.mkdtemp(prefix="rota-slurm-test-"))
    base.chmod(0o711)
    yield base / "data"
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def leftovers(slurm_env, job_id) -> Iterator[None]:
    """At the end, cancel every Slurm job of the test's rota job (``rota-<job id>-*``)."""
    yield
    from rota.backends.slurm.records import SQUEUE_JOBS, parse_squeue
    jobs = subprocess.run(list(SQUEUE_JOBS), capture_output=True, text=True, env=slurm_env)
    ours = [str(j.id) for j in parse_squeue(jobs.stdout) if j.name.startswith(f"rota-{job_id}")
            and not j.phase.ended]
    if ours:
        subprocess.run(["scancel", *ours], env=slurm_env, capture_output=True)
