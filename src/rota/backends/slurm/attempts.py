"""Where the Slurm backend keeps each attempt, and how it knows whether one was submitted.

Layout under the data directory: ``slurm-instance`` (this control plane's instance id, see
``rota.backends.slurm.backend``), ``slurm-reports.json`` (the reported ends Slurm has not
confirmed yet, ``rota.backends.slurm.early``), and for attempt ``n`` of job ``J``::

    jobs/J/attempt-n/          0700, the control plane's: submit.json, handle.json
    jobs/J/attempt-n-logs/     0700, owned by the account the job runs as: batch.log,
                               rank-<r>.out, rank-<r>.err (Slurm writes them as that account)

The data directory must be on a filesystem the Slurm nodes share at the same path: the nodes
write the logs there (and run jobs in ``jobs/J/work`` when a job names no workdir).

Launching is idempotent through these files (``rota.backends.slurm.launches``):
``submit.json`` is written (durably) before ``sbatch`` runs, ``handle.json`` once it printed
the Slurm job id. So:

- no ``submit.json``: the attempt was never submitted from this data directory (``recover``
  answers None without asking Slurm, except while taking over from a control plane with a
  data directory of its own, whose files are there: then it asks Slurm, and writes both
  files for an attempt it finds);
- ``handle.json``: it was, as that Slurm job;
- ``submit.json`` alone: the control plane died around ``sbatch``. An ``sbatch`` it started
  may still run (it outlives its parent): ``inflight`` finds it by the attempt's job name in
  its command line, so that it is waited for before Slurm is asked for the name.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rota.backends.base import Handle, RunAs
from rota.backends.procs import (
    claim_json, make_dirs, read_json, signal_pid, write_json_atomic,
)
from rota.core.datadir import SLURM_INSTANCE, job_home

INFLIGHT_WAIT_S = 30.0


@dataclass(frozen=True, slots=True)
class AttemptFiles:
    private: Path
    logs: Path

    @classmethod
    def of(cls, data_dir: Path, job_id: str, attempt: int) -> AttemptFiles:
        job = job_home(data_dir, job_id)
        return cls(job / f"attempt-{attempt}", job / f"attempt-{attempt}-logs")

    @property
    def submitted(self) -> bool:
        """Whether a submission of this attempt was ever begun."""
        return (self.private / "submit.json").exists()

    def prepare(self, run_as: RunAs | None) -> None:
        """Both directories; the log directory given to the account the job runs as."""
        make_dirs(self.private.parent, 0o711)
        make_dirs(self.private, 0o700)
        make_dirs(self.logs, 0o700)
        if run_as is not None:
            os.chown(self.logs, run_as.uid, run_as.gid)

    def intend(self, name: str) -> None:
        write_json_atomic(self.private / "submit.json",
                          {"name": name, "pid": os.getpid(), "time": time.time()}, mode=0o600)

    def save(self, handle: Handle) -> None:
        write_json_atomic(self.private / "handle.json", handle.to_dict(), mode=0o600)

    def saved(self) -> dict[str, Any] | None:
        return read_json(self.private / "handle.json")


def instance(data_dir: Path) -> str:
    """This control plane's instance id (``slurm-instance`` in the data directory), made
    once: 12 random hex digits."""
    path = data_dir / SLURM_INSTANCE
    current = read_json(path)
    if isinstance(current, str) and current:
        return current
    make_dirs(data_dir, 0o711)
    claim_json(path, secrets.token_hex(6))  # two first starts at once agree on one
    return str(read_json(path))


def next_attempt(data_dir: Path, job_id: str) -> int:
    """The first attempt number of ``job_id`` with nothing on disk (launches without one)."""
    n = 0
    while AttemptFiles.of(data_dir, job_id, n).private.exists():
        n += 1
    return n


def inflight(name: str) -> list[int]:
    """Pids of ``sbatch`` processes on this machine submitting a job named ``name``."""
    wanted = f"--job-name={name}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path("/proc", entry, "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        # sbatch itself, or a script named sbatch that a site (or a test) put before it
        if wanted in argv and any(os.path.basename(a) == b"sbatch" for a in argv[:2]):
            found.append(int(entry))
    return found


def wait_inflight(name: str, timeout_s: float = INFLIGHT_WAIT_S) -> None:
    """Wait for every ``sbatch`` of ``name`` to end (it is quick); kill what outlives
    ``timeout_s``. Once this returns, no process here can submit ``name`` any more."""
    end = time.monotonic() + timeout_s
    while (pids := inflight(name)) and time.monotonic() < end:
        time.sleep(0.05)
    for pid in pids:
        signal_pid(pid, 9)
    while inflight(name) and time.monotonic() < end + 5:
        time.sleep(0.05)
