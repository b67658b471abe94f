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

import functools
import os
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

from rota.backends.slurm.nodes import Inventory, inventory, parse_gpu_types
from rota.backends.slurm.records import (
    SINFO_NODES, SQUEUE_JOBS, SlurmJob, parse_sinfo, parse_squeue, parse_sacct,
    parse_sacct_exit_codes, sacct_exit_codes, sacct_jobs, with_exit_codes,
)
from waiting import poll

DATA = Path(__file__).parent / "data"
GPU_TYPES = parse_gpu_types({"h100": "H100-80GB", "a100": "A100-40GB"})
wait = functools.partial(poll, timeout=90.0, every=0.3)


def data(name: str) -> str:
    return (DATA / name).read_text()


@dataclass
class Slurm:
    """The fixture cluster, through its commands."""

    env: dict[str, str]
    submitted: list[int] = field(default_factory=list)

    def run(self, argv: tuple[str, ...] | list[str], stdin: str | None = None) -> str:
        done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                              env=self.env, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")
        return done.stdout

    def sbatch(self, argv: tuple[str, ...] | list[str], script: str | None = None) -> int:
        job_id = int(self.run(argv, script).strip().split(";")[0])
        self.submitted.append(job_id)
        return job_id

    def inventory(self) -> Inventory:
        return inventory(parse_sinfo(self.run(SINFO_NODES)), self.jobs(), GPU_TYPES)

    def jobs(self) -> tuple[SlurmJob, ...]:
        return parse_squeue(self.run(SQUEUE_JOBS))

    def job(self, job_id: int) -> SlurmJob | None:
        return next((j for j in self.jobs() if j.id == job_id), None)

    def ended(self, job_id: int) -> SlurmJob:
        """The job from squeue once it has ended."""
        return wait(lambda: (j := self.job(job_id)) is not None and j.phase.ended and j,
                    f"Slurm job {job_id} to end")

    def accounted(self, job_id: int, name: str) -> SlurmJob:
        """The ended job named ``name`` from sacct, exit codes included. slurmdbd records a
        job asynchronously: for a moment after the end a record may lack its name (it reads
        ``allocation``), so this waits for the whole record."""
        def look() -> SlurmJob | None:
            ids = (job_id,)
            found = parse_sacct(self.run(sacct_jobs("now-1days", job_ids=ids)))
            codes = parse_sacct_exit_codes(self.run(sacct_exit_codes("now-1days", job_ids=ids)))
            jobs = with_exit_codes(found, codes)
            return next((j for j in jobs if j.phase.ended and j.exit is not None
                         and j.name == name), None)
        return wait(look, f"sacct to record Slurm job {job_id}")


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
