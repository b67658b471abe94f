"""``rota up --backend slurm`` on the fixture cluster, driven from the CLI as a new user would.

``SlurmServer(root, slurm_env)`` runs ``rota up --backend slurm --slurm-gpu-types ... --port 0``
in a subprocess with ``XDG_CONFIG_HOME``/``XDG_DATA_HOME`` under ``root`` (never the real home)
and a data directory every account may pass through, waits until the API answers, and runs
``rota`` commands against it (``cli``, ``json``). ``kill9`` kills the control plane (its
process group) and leaves the Slurm jobs running; ``start`` starts it again; ``close`` stops it
and cancels every Slurm job this control plane submitted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from rota.backends.slurm.attempts import instance
from rota.backends.slurm.records import SQUEUE_JOBS, parse_squeue
from rotaup import ROTA, RotaUp

START_TIMEOUT_S = 90.0  # a loaded 2-core machine imports FastAPI slowly; never asserted on
GPU_TYPES = "h100=H100-80GB,a100=A100-40GB"


class SlurmServer(RotaUp):
    def __init__(self, root: Path, slurm_env: dict[str, str], *flags: str) -> None:
        super().__init__(root, "--backend", "slurm", "--slurm-gpu-types", GPU_TYPES,
                         "--interval", "0.5", *flags, env=slurm_env,
                         pythonpath=os.pathsep.join(p for p in sys.path if p),
                         start_timeout_s=START_TIMEOUT_S)
        root.chmod(0o711)
        self.work = root / "work"
        self.work.mkdir(mode=0o755)
        self.env["COLUMNS"] = "200"

    def cli(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        """``rota ARGS...`` run in the work directory; its standard output."""
        done = subprocess.run([*ROTA, *args], cwd=self.work,
                              env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"rota {' '.join(args)} failed ({done.returncode}):\n"
                                 f"{done.stdout}{done.stderr}")
        return done.stdout

    def json(self, command: str, *args: str) -> Any:
        """``rota COMMAND --json ARGS...`` read as JSON (before ARGS: ``run`` ends with its
        command line)."""
        return json.loads(self.cli(command, "--json", *args))

    def submit(self, *run_args: str) -> str:
        """``rota run ARGS`` -> the job id."""
        return str(self.json("run", *run_args)["id"])

    def job(self, job_id: str) -> dict[str, Any]:
        return self.json("show", job_id)

    def slurm_jobs(self) -> list:
        """Every Slurm job this control plane submitted that squeue still lists."""
        mine = f"@{instance(self.data_dir)}"
        jobs = subprocess.run(list(SQUEUE_JOBS), env=self.env, capture_output=True, text=True)
        return [j for j in parse_squeue(jobs.stdout) if j.comment.endswith(mine)]

    def close(self) -> None:
        self.end()
        if (self.data_dir / "slurm-instance").exists():
            live = [str(j.id) for j in self.slurm_jobs() if not j.phase.ended]
            if live:
                subprocess.run(["scancel", *live], env=self.env, capture_output=True)


def job_file(server: SlurmServer, name: str, **fields: str) -> str:
    """Submit a job file of the default project and queue with ``fields``; the job's id."""
    lines = [f"name: {name}", "project: default", "queue: default"]
    lines += [f"{k}: {v}" for k, v in fields.items()]
    path = server.work / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(server.json("submit", str(path))["id"])


@contextmanager
def running(slurm_env: dict[str, str], prefix: str, *flags: str) -> Iterator[SlurmServer]:
    """A started ``SlurmServer`` (with more ``rota up`` ``flags``) in a new temporary directory
    (not pytest's: every account of the cluster must pass through it), closed and removed
    afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    plane = SlurmServer(root, slurm_env, *flags)
    try:
        plane.start()
        yield plane
    finally:
        plane.close()
        shutil.rmtree(root, ignore_errors=True)
