"""What the Slurm tests share: the captured output in data/, the GPU types of the fixture, a
builder of Slurm nodes, and ``Slurm``, the fixture cluster through its commands."""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rota.backends.slurm.nodes import Inventory, inventory, parse_gpu_types
from rota.backends.slurm.records import (
    SINFO_NODES, SQUEUE_JOBS, SlurmJob, SlurmNode, parse_sacct, parse_sacct_exit_codes,
    parse_sinfo, parse_squeue, sacct_exit_codes, sacct_jobs, with_exit_codes,
)
from rota.backends.slurm.text import Gres
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

    def require_accounting(self) -> None:
        """Skip unless the cluster keeps accounting (the fixture does unless started with
        ROTA_SLURM_ACCOUNTING=0)."""
        if "accounting_storage/slurmdbd" not in self.run(["scontrol", "show", "config"]):
            pytest.skip("this Slurm keeps no accounting (started with ROTA_SLURM_ACCOUNTING=0?)")

    def accounted(self, job_id: int, name: str) -> SlurmJob:
        """The ended job named ``name`` from sacct, exit codes included. slurmdbd records a
        job asynchronously: for a moment after the end a record may lack its name (it reads
        ``allocation``), so this waits for the whole record."""
        self.require_accounting()

        def look() -> SlurmJob | None:
            ids = (job_id,)
            found = parse_sacct(self.run(sacct_jobs("now-1days", job_ids=ids)))
            codes = parse_sacct_exit_codes(self.run(sacct_exit_codes("now-1days", job_ids=ids)))
            jobs = with_exit_codes(found, codes)
            return next((j for j in jobs if j.phase.ended and j.exit is not None
                         and j.name == name), None)
        return wait(look, f"sacct to record Slurm job {job_id}")


def slurm_node(name="n1", gres=(Gres("gpu", "h100", 4), Gres("shard", "h100", 16)),
               state="idle", flags=(), reason="", partitions=("debug",), features=()):
    """A Slurm node of 32 CPUs (2 threads per core) and 250 GiB, H100s cut in 4 shards."""
    return SlurmNode(name=name, address="10.0.0.1", partitions=partitions, cpus=32,
                     memory_mib=256000, threads_per_core=2, gres=tuple(gres), gres_used=(),
                     state=state, flags=frozenset(flags), reason=reason, features=features)
