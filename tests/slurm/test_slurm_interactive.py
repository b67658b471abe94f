"""Working inside running jobs on the Slurm fixture, through ``rota up --backend slurm``'s API:
``rota exec`` is a step of its own in the job's allocation (``srun --jobid --overlap``), run
as the job's owner in its working directory with its variables, and exits with the command's
status; ``rota forward`` reaches a server the job runs on its node."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from typing import Iterator

import pytest

from rota.backends.base import BackendError, ReplicaState as R, RunAs
from rotaup import ROTA
from slurmkit import on, rota_job, run_spec, slurm_backend, status_of, wait
from slurmserver import SlurmServer, running
from terminal import Terminal, on_terminal
from test_slurm_backend import running_in_slurm
from waiting import poll


@pytest.fixture
def server(slurm_env) -> Iterator[SlurmServer]:
    with running(slurm_env, "rota-slurm-interactive-") as plane:
        yield plane


def _running(server: SlurmServer, job: str) -> None:
    poll(lambda: server.job(job)["state"] == "running", f"job {job} to run", timeout=120)


def _rota(server: SlurmServer, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ROTA, *args], cwd=server.work, env=server.env,
                          capture_output=True, text=True, timeout=120)


def test_exec_runs_a_step_in_the_jobs_allocation(server: SlurmServer) -> None:
    (server.work / "env.yaml").write_text(
        "name: held\nproject: default\nqueue: default\nentrypoint: sleep 300\n"
        "env:\n  MINE: set-in-job\nresources:\n  cpu: 1\n  memory: 256Mi\n")
    job = str(server.json("submit", "env.yaml")["id"])
    _running(server, job)
    ran = _rota(server, "exec", job, "--", "sh", "-c",
                'echo "$ROTA_JOB_ID $MINE $SLURM_JOB_ID"; pwd; exit 3')
    assert ran.returncode == 3, ran.stdout + ran.stderr
    [allocation] = [j.id for j in server.slurm_jobs() if j.name.startswith(f"rota-{job}-")]
    # srun's own line on the failure (``srun: error: ...``) comes before or after the output
    lines = [line for line in ran.stdout.splitlines() if not line.startswith("srun: ")]
    assert lines[0] == f"{job} set-in-job {allocation}", ran.stdout  # a step of the job's
    assert lines[1] == str(server.data_dir / "jobs" / job / "work")  # its working directory
    terminal = _rota(server, "exec", "--tty", job, "--", "sh", "-c", "tty")
    assert terminal.returncode == 0 and "/dev/pts/" in terminal.stdout, terminal.stderr
    refused = _rota(server, "exec", "--replica", "1", job, "--", "true")
    assert refused.returncode == 2 and "replicas 0 to 0, not 1" in refused.stderr
    server.cli("cancel", job)


def test_shell_is_an_allocation_with_a_terminal(server: SlurmServer) -> None:
    jobs: list[str] = []

    def session(terminal: Terminal) -> None:
        assert terminal.read_until(b"holds the allocation"), terminal.seen
        jobs.append(terminal.seen.split(b"rota: job ")[1].split()[0].decode())
        _running(server, jobs[0])
        terminal.type(b"echo on-$SLURMD_NODENAME-$ROTA_JOB_ID; tty; exit 6\n")
    seen, status = on_terminal([*ROTA, "shell", "--memory", "256Mi"], server.env, server.work,
                               session)
    [job] = jobs
    assert b"on-node" in seen and f"-{job}".encode() in seen, seen
    assert b"/dev/pts/" in seen and status == 6
    assert server.job(job)["state"] == "cancelled"


def test_forward_reaches_a_server_on_the_jobs_node(server: SlurmServer) -> None:
    (server.work / "notes.txt").write_text("served from a slurm node\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    job = server.submit("--cpu", "1", "--memory", "256Mi", "--", sys.executable, "-m",
                        "http.server", str(port), "--bind", "0.0.0.0")
    _running(server, job)
    forward = subprocess.Popen([*ROTA, "forward", job, f"{port}:0"], cwd=server.work,
                               env=server.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = forward.stdout.readline()
        assert line.startswith("Forwarding http://127.0.0.1:"), line + forward.stderr.read()
        url = line.split()[1]

        def fetched() -> str | None:
            try:
                with urllib.request.urlopen(f"{url}/notes.txt", timeout=10) as answer:
                    return answer.read().decode()
            except OSError:
                return None  # the job's server does not listen yet
        assert poll(fetched, "the job's server through the tunnel", timeout=60) == \
            "served from a slurm node\n"
    finally:
        forward.send_signal(signal.SIGINT)
        forward.wait(timeout=30)
        server.cli("cancel", job)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd"),
                    reason="needs root and useradd: runs a job as another OS account")
def test_a_command_runs_as_the_jobs_owner_with_its_devices(slurm, data_dir, job_id,
                                                           leftovers) -> None:
    user = f"ri{job_id[1:9]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", user], check=True,
                   capture_output=True)
    try:
        entry = pwd.getpwnam(user)
        account = RunAs(user, entry.pw_uid, entry.pw_gid, (), "/", "/bin/sh")
        work = data_dir.parent / "work"
        work.mkdir(mode=0o700)
        os.chown(work, entry.pw_uid, entry.pw_gid)
        backend = slurm_backend(data_dir)
        assert backend.capabilities.interactive
        handle = backend.launch(rota_job(job_id, gpus=1), on(("node2", 1)),
                                run_spec("sleep 300", work, run_as=account), attempt=0)
        status_of(backend, handle, lambda s: s.waiting is None, "the job to run")
        wait(lambda: running_in_slurm(slurm, handle), "Slurm to run the job")
        channel = backend.open_exec(handle, 0, ["sh", "-c", 'echo "$(id -un) $SLURMD_NODENAME '
                                                "$CUDA_VISIBLE_DEVICES $HOME\"; pwd"], False)
        out = b""
        while chunk := channel.read():
            out += chunk
        channel.close()
        assert channel.exit_code() == 0, out
        first, where = out.decode().splitlines()[:2]
        assert first.split()[:2] == [user, "node2"] and first.split()[2]  # its GPU, by Slurm
        assert where == str(work)
        backend.cancel(handle, 0)
        status_of(backend, handle, lambda s: s.state is not R.RUNNING, "the job to end")
        with pytest.raises(BackendError) as ended:
            backend.open_exec(handle, 0, ["true"], False)
        assert ended.value.code == "not_running"
    finally:
        subprocess.run(["pkill", "-KILL", "-u", user], capture_output=True)
        subprocess.run(["userdel", user], capture_output=True)
