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
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx

from rota.backends.slurm.attempts import instance
from rota.backends.slurm.records import SQUEUE_JOBS, parse_squeue

START_TIMEOUT_S = 90.0  # a loaded 2-core machine imports FastAPI slowly; never asserted on
GPU_TYPES = "h100=H100-80GB,a100=A100-40GB"


class SlurmServer:
    def __init__(self, root: Path, slurm_env: dict[str, str]) -> None:
        self.root = root
        root.chmod(0o711)
        self.data_dir = root / "data"
        self.work = root / "work"
        self.work.mkdir(mode=0o755)
        self.env = {k: v for k, v in slurm_env.items() if k not in ("ROTA_URL", "ROTA_TOKEN")}
        self.env.update(XDG_CONFIG_HOME=str(root / "config"), XDG_DATA_HOME=str(root / "share"),
                        PYTHONPATH=os.pathsep.join(p for p in sys.path if p), COLUMNS="200")
        self.credentials = root / "config" / "rota" / "credentials.json"
        self.log = root / "rota-up.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert self.proc is None, "already running"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rota.cli.main", "up", "--backend", "slurm",
                 "--slurm-gpu-types", GPU_TYPES, "--port", "0", "--data-dir",
                 str(self.data_dir), "--interval", "0.5"],
                env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True)
        end = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"rota up exited with {self.proc.returncode}:\n"
                                     f"{self.output()}")
            try:
                creds = json.loads(self.credentials.read_text())
                reply = httpx.get(f"{creds['url']}/v1/whoami", timeout=5,
                                  headers={"Authorization": f"Bearer {creds['token']}"})
                if reply.status_code == 200:
                    return
            except (OSError, ValueError, KeyError, httpx.HTTPError):
                pass
            time.sleep(0.1)
        raise AssertionError(f"rota up did not become ready:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def cli(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        """``rota ARGS...`` run in the work directory; its standard output."""
        done = subprocess.run([sys.executable, "-m", "rota.cli.main", *args], cwd=self.work,
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

    def kill9(self) -> None:
        """``kill -9`` the control plane (its process group); Slurm's jobs keep running."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None
        if (self.data_dir / "slurm-instance").exists():
            live = [str(j.id) for j in self.slurm_jobs() if not j.phase.ended]
            if live:
                subprocess.run(["scancel", *live], env=self.env, capture_output=True)


@contextmanager
def running(slurm_env: dict[str, str], prefix: str) -> Iterator[SlurmServer]:
    """A started ``SlurmServer`` in a new temporary directory (not pytest's: every account of
    the cluster must pass through it), closed and removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    plane = SlurmServer(root, slurm_env)
    try:
        plane.start()
        yield plane
    finally:
        plane.close()
        shutil.rmtree(root, ignore_errors=True)
