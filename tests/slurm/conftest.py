"""Fixtures for the Slurm tests.

Pure tests read ``data/``: output of Slurm 22.05's commands captured on the fixture cluster
(``sinfo --json`` with a node down and one drained, ``squeue --all --json`` with GPU, shard,
gang, pending and ended jobs, ``sacct --json`` and its parseable exit codes).

Tests that take ``slurm`` run against the real cluster of ``tests/slurm/fixture`` (started by
``eval "$(.ci/slurm)"``), found through ``SLURM_CONF``. Without it they skip, unless ``CI`` is
set: then they fail, because CI must test against the real Slurm. Each test names its Slurm
jobs after a fresh rota job id and cancels what it left behind.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from typing import Iterator

import pytest

from slurmkit import Slurm


def _cluster_env() -> dict[str, str]:
    conf = os.environ.get("SLURM_CONF")
    if not conf:
        message = ("SLURM_CONF is not set: run `eval \"$(.ci/slurm)\"` to test against the "
                   "real Slurm of tests/slurm/fixture")
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the Slurm tests must run: {message}")
        pytest.skip(message)
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
