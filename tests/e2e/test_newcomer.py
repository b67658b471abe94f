"""The README's path on this 2-core machine, with a real ``rota up`` (``conftest.RotaServer``):
the shipped example fits and runs, ``rota run --wait`` streams a job's output and exits with
its code as ``srun`` does, and a job reaches an MPS daemon whose pipe directory is not the
default one (the daemon's control pipe is a real named pipe; no GPU is needed to see that the
job is pointed at it with its limits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def rota(server, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**server.env, "ROTA_URL": server.url, "ROTA_TOKEN": server.token, "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "rota.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def ended(server, job: str, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = json.loads(rota(server, "show", job, "--json").stdout)
        if shown["state"] in ("succeeded", "failed", "cancelled", "rejected"):
            return shown
        time.sleep(0.3)
    raise AssertionError(f"job {job} did not end: {shown}")


def test_the_shipped_example_runs_on_a_small_machine(rota_server):
    submitted = rota(rota_server, "submit", "examples/jobs/one-gpu.yaml", "--json")
    assert submitted.returncode == 0, submitted.stderr
    job = json.loads(submitted.stdout)
    assert (job["project"], job["queue"]) == ("default", "default")
    final = ended(rota_server, job["id"])
    assert final["state"] == "succeeded", rota(rota_server, "show", job["id"]).stdout
    assert "epoch 10/10" in rota(rota_server, "logs", job["id"]).stdout


def test_run_wait_streams_the_output_and_exits_with_the_jobs_code(rota_server, tmp_path):
    done = rota(rota_server, "run", "--wait", "--", "sh", "-c",
                "echo to-out; echo to-err >&2; exit 3", cwd=tmp_path)
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert done.stdout == "to-out\n"
    assert "to-err" in done.stderr and "exit code 3" in done.stderr
    fine = rota(rota_server, "run", "-w", "--", "echo", "fine", cwd=tmp_path)
    assert fine.returncode == 0 and fine.stdout == "fine\n", fine.stderr


@pytest.fixture
def mps_server(rota_server, tmp_path):
    """``rota up`` started again with ``CUDA_MPS_PIPE_DIRECTORY`` and ``CUDA_MPS_LOG_DIRECTORY``
    set and an MPS control pipe in that directory, as ``nvidia-cuda-mps-control -d`` leaves
    it."""
    pipes, logs = tmp_path / "mps-pipe", tmp_path / "mps-log"
    pipes.mkdir()
    logs.mkdir()
    os.mkfifo(pipes / "control")
    rota_server.stop()
    rota_server.env.update(CUDA_MPS_PIPE_DIRECTORY=str(pipes), CUDA_MPS_LOG_DIRECTORY=str(logs))
    rota_server.start()
    return rota_server, pipes, logs


def test_a_job_reaches_an_mps_daemon_in_a_non_default_pipe_directory(mps_server, tmp_path):
    server, pipes, logs = mps_server
    done = rota(server, "run", "--wait", "--gpus", "0.25", "--gpu-memory", "20Gi", "--", "sh",
                "-c", 'echo "$CUDA_MPS_PIPE_DIRECTORY|$CUDA_MPS_LOG_DIRECTORY|'
                      '$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE|$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"',
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{pipes}|{logs}|25|0=20480M"


def test_compute_enforcement_only_with_a_control_pipe_in_that_directory(tmp_path, monkeypatch):
    from rota.backends.gpus import local_node
    from rota.backends.local import LocalBackend
    backend = LocalBackend(tmp_path / "data", node=local_node("n", gpus="1xH100-80GB"))
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", str(tmp_path / "mps-pipe"))
    assert not backend.capabilities.compute_enforcement
    (tmp_path / "mps-pipe").mkdir()
    os.mkfifo(tmp_path / "mps-pipe" / "control")
    assert backend.capabilities.compute_enforcement
