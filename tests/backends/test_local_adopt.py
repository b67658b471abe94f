"""Crash safety: a control plane that restarts (a new backend over the same data directory, or
a real ``kill -9`` of the process that launched the job) finds out what its jobs did."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from backend_support import a_job, placement, python, run, wait_ended, wait_for
from rota.backends.base import BackendError, Handle, ReplicaState
from rota.backends.local import LocalBackend, proc
from rota.backends.procs import is_running, read_json, start_ticks
from rota.core import Node

WAIT_FOR_GO = ("import os, sys, time\n"
               "open('started', 'w').write(str(os.getpid()))\n"
               "while not os.path.exists('go'): time.sleep(0.02)\n"
               "sys.exit(5)\n")


def restarted(data_dir: Path, n1: Node, persisted: str) -> tuple[LocalBackend, Handle]:
    """What a restarted control plane does: a fresh backend, the handle read back from JSON."""
    return LocalBackend(data_dir, node=n1), Handle.from_json(persisted)


def test_running_job_is_adopted_and_its_exit_code_read_later(
        data_dir: Path, n1: Node, workdir: Path) -> None:
    first = LocalBackend(data_dir, node=n1)
    persisted = first.launch(a_job(), placement([0]), run(python(WAIT_FOR_GO), str(workdir))).to_json()
    wait_for((workdir / "started").exists, "the job to start")
    del first

    backend, handle = restarted(data_dir, n1, persisted)
    assert backend.adopt(handle).state is ReplicaState.RUNNING
    assert backend.tracked() == [handle]
    (workdir / "go").write_text("")
    assert wait_ended(backend, handle).exit_codes == (5,)
    assert backend.tracked() == []


def test_job_that_finished_meanwhile_is_reported_with_its_code(
        data_dir: Path, n1: Node, workdir: Path) -> None:
    first = LocalBackend(data_dir, node=n1)
    handle = first.launch(a_job(), placement([0]), run("exit 4", str(workdir)))
    wait_for(lambda: Path(proc(handle.replicas[0]).dir, "status.json").exists(), "the job to finish")
    persisted = handle.to_json()
    del first

    backend, handle = restarted(data_dir, n1, persisted)
    (replica,) = backend.adopt(handle).replicas
    assert (replica.state, replica.exit_code) == (ReplicaState.EXITED, 4)


def test_job_whose_processes_vanished_is_lost(data_dir: Path, n1: Node, workdir: Path) -> None:
    first = LocalBackend(data_dir, node=n1)
    handle = first.launch(a_job(), placement([0]), run(python(WAIT_FOR_GO), str(workdir)))
    wait_for((workdir / "started").exists, "the job to start")
    supervisor = proc(handle.replicas[0])
    child = wait_for(lambda: read_json(Path(supervisor.dir) / "child.json"), "child.json")
    os.kill(supervisor.pid, signal.SIGKILL)  # the supervisor dies without a word,
    os.killpg(child["pid"], signal.SIGKILL)          # and so does the job
    wait_for(lambda: not is_running(child["pid"], child["start_ticks"]), "the job to die")
    persisted = handle.to_json()
    del first

    backend, handle = restarted(data_dir, n1, persisted)
    wait_for(lambda: not is_running(supervisor.pid, supervisor.start_ticks),
             "the supervisor to die")
    (replica,) = backend.adopt(handle).replicas
    assert replica.state is ReplicaState.LOST
    assert "recorded no exit status" in replica.reason


def test_reused_pid_is_not_mistaken_for_the_job(data_dir: Path, n1: Node, workdir: Path) -> None:
    """A handle whose pid now belongs to another process (here: this test) is lost."""
    backend = LocalBackend(data_dir, node=n1)
    handle = backend.launch(a_job(), placement([0]), run("exit 0", str(workdir)))
    wait_ended(backend, handle)
    rep = handle.replicas[0]
    Path(proc(rep).dir, "status.json").unlink()  # as if the job had never written its end
    me = os.getpid()
    ref = {**rep.ref, "pid": me, "start_ticks": start_ticks(me) + 1}
    stale = replace(handle, replicas=(replace(rep, ref=ref),))
    assert LocalBackend(data_dir, node=n1).adopt(stale).state is ReplicaState.LOST
    assert LocalBackend(data_dir, node=n1).adopt(replace(stale, ref={"boot_id": "another-boot"})) \
        .replicas[0].reason == "the machine restarted"


def test_adopted_job_can_be_cancelled(data_dir: Path, n1: Node, workdir: Path) -> None:
    first = LocalBackend(data_dir, node=n1)
    persisted = first.launch(a_job(), placement([0]), run(python(WAIT_FOR_GO), str(workdir))).to_json()
    wait_for((workdir / "started").exists, "the job to start")
    del first
    backend, handle = restarted(data_dir, n1, persisted)
    backend.adopt(handle)
    backend.cancel(handle, grace_s=5)
    (replica,) = wait_ended(backend, handle).replicas
    assert (replica.exit_code, replica.signal, replica.reason) == (143, signal.SIGTERM, "cancelled")


CONTROL_PLANE = """
import sys, time
from rota.backends.gpus import local_node
from rota.backends.base import LaunchSpec
from rota.backends.local import LocalBackend
from rota.core import DeviceShare, Job, Placement, ReplicaPlacement, ReplicaRequest
backend = LocalBackend(sys.argv[1], node=local_node("n1", gpus="4xH100-80GB"))
job = Job("survivor", "p", "q", ReplicaRequest(), replicas=2)
placement = Placement(tuple(ReplicaPlacement("n1", (DeviceShare(i, 1000, 81920),)) for i in (0, 1)))
code = "import os, sys, time\\nwhile not os.path.exists('go'): time.sleep(0.02)\\nsys.exit(int(os.environ['ROTA_REPLICA_RANK']) + 10)"
handle = backend.launch(job, placement, LaunchSpec((sys.executable, "-c", code), sys.argv[2]))
print(handle.to_json(), flush=True)
time.sleep(60)
"""


def test_jobs_outlive_a_killed_control_plane(data_dir: Path, n1: Node, workdir: Path) -> None:
    plane = subprocess.Popen([sys.executable, "-c", CONTROL_PLANE, str(data_dir), str(workdir)],
                             stdout=subprocess.PIPE, text=True)
    try:
        persisted = plane.stdout.readline()  # type: ignore[union-attr]
    finally:
        plane.kill()  # SIGKILL: no cleanup of any kind in the control plane
        plane.wait()
        plane.stdout.close()  # type: ignore[union-attr]
    backend, handle = restarted(data_dir, n1, persisted)
    assert backend.adopt(handle).state is ReplicaState.RUNNING
    (workdir / "go").write_text("")
    assert wait_ended(backend, handle).exit_codes == (10, 11)


def test_handle_of_another_backend_is_refused(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(a_job(), placement([0]), run("exit 0", str(workdir)))
    with pytest.raises(BackendError) as err:
        backend.adopt(replace(handle, backend="slurm"))
    assert err.value.code == "foreign_handle"
