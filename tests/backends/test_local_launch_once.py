"""No double launch: attempt ``n`` of a job runs at most once, whatever point a control plane
is killed at while launching it.

A control plane in a subprocess launches a gang of two and kills itself with SIGKILL at one of
three points: before the first supervisor starts, between the two, or after both started but
before the handle was saved. A fresh backend then recovers or launches the same attempt. Each
run of the command appends a line to a marker file, so a second run would show.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from backend_support import a_job, placement, poll_one, python, run, wait_ended, wait_for
from rota.backends.base import ReplicaState
from rota.backends.local import LocalBackend, proc
from rota.backends.procs import is_running
from rota.core import Node

# each run appends its rank to 'runs', then waits for 'go'
RUNNER = ("import os, time\n"
          "open('runs', 'a').write(os.environ['ROTA_REPLICA_RANK'] + '\\n')\n"
          "while not os.path.exists('go'): time.sleep(0.02)\n")

DYING_PLANE = """
import os, signal, sys, time
from pathlib import Path
from rota.backends.gpus import local_node
from rota.backends.base import LaunchSpec
from rota.backends.local import LocalBackend, proc
from rota.core import DeviceShare, Job, Placement, ReplicaPlacement, ReplicaRequest

where = sys.argv[3]

class Dying(LocalBackend):
    def before_start(self, attempt_dir, rank):
        if where == f"before-{rank}":  # once the earlier supervisors own their replicas
            while not all(Path(attempt_dir, f"replica-{r}", "supervisor.json").exists()
                          for r in range(rank)):
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)

    def _save(self, handle):
        if where == "before-save":  # once every supervisor owns its replica
            while not all(Path(proc(r).dir, "supervisor.json").exists() for r in handle.replicas):
                time.sleep(0.01)
            os.kill(os.getpid(), signal.SIGKILL)
        return super()._save(handle)

backend = Dying(sys.argv[1], node=local_node("n1", gpus="4xH100-80GB"))
job = Job("j1", "p", "q", ReplicaRequest(), replicas=2)
placement = Placement(tuple(ReplicaPlacement("n1", (DeviceShare(i, 1000, 81920),)) for i in (0, 1)))
backend.launch(job, placement, LaunchSpec((sys.executable, "-c", sys.argv[4]), sys.argv[2]), attempt=0)
"""


def die_launching(data_dir: Path, workdir: Path, where: str) -> None:
    plane = subprocess.run([sys.executable, "-c", DYING_PLANE, str(data_dir), str(workdir), where,
                            RUNNER], timeout=60)
    assert plane.returncode == -signal.SIGKILL


def runs(workdir: Path) -> list[str]:
    path = workdir / "runs"
    return sorted(path.read_text().split()) if path.exists() else []


GANG = a_job("j1", replicas=2)
GANG_PLACEMENT = placement([0], [1])


def test_an_attempt_launched_twice_runs_once(data_dir: Path, n1: Node, workdir: Path) -> None:
    first = LocalBackend(data_dir, node=n1).launch(GANG, GANG_PLACEMENT, run(python(RUNNER), str(workdir)), attempt=0)
    wait_for(lambda: len(runs(workdir)) == 2, "both replicas to run")
    again = LocalBackend(data_dir, node=n1).launch(GANG, GANG_PLACEMENT, run(python(RUNNER), str(workdir)), attempt=0)
    assert again == first
    (workdir / "go").write_text("")
    assert wait_ended(LocalBackend(data_dir, node=n1), again).succeeded
    assert runs(workdir) == ["0", "1"]


def test_plane_killed_before_saving_the_handle_is_recovered_not_relaunched(
        data_dir: Path, n1: Node, workdir: Path) -> None:
    die_launching(data_dir, workdir, "before-save")
    assert not (data_dir / "jobs/j1/attempt-0/handle.json").exists()
    backend = LocalBackend(data_dir, node=n1)
    handle = backend.recover(GANG, GANG_PLACEMENT, attempt=0)
    assert handle is not None and handle.attempt == 0
    assert poll_one(backend, handle).state is ReplicaState.RUNNING
    assert backend.launch(GANG, GANG_PLACEMENT, run(python(RUNNER), str(workdir)), attempt=0) == handle
    wait_for(lambda: len(runs(workdir)) == 2, "both replicas to run")
    (workdir / "go").write_text("")
    assert wait_ended(backend, handle).succeeded
    assert runs(workdir) == ["0", "1"]
    assert not (data_dir / "jobs/j1/attempt-0.1").exists()


def test_half_launched_gang_is_recovered_with_the_rest_fenced(
        data_dir: Path, n1: Node, workdir: Path) -> None:
    die_launching(data_dir, workdir, "before-1")
    backend = LocalBackend(data_dir, node=n1)
    handle = backend.recover(GANG, GANG_PLACEMENT, attempt=0)
    assert handle is not None
    status = poll_one(backend, handle)
    assert status.replicas[0].state is ReplicaState.RUNNING
    assert (status.replicas[1].state, status.replicas[1].exit_code) == (ReplicaState.EXITED, None)
    assert "never started" in status.replicas[1].reason
    wait_for(lambda: runs(workdir), "replica 0 to run")
    backend.cancel(handle, 0.0)
    wait_ended(backend, handle)
    assert runs(workdir) == ["0"]


def test_attempt_that_never_started_is_launched_once_in_a_fresh_directory(
        data_dir: Path, n1: Node, workdir: Path) -> None:
    die_launching(data_dir, workdir, "before-0")
    backend = LocalBackend(data_dir, node=n1)
    assert backend.recover(GANG, GANG_PLACEMENT, attempt=0) is None
    handle = backend.launch(GANG, GANG_PLACEMENT, run(python(RUNNER), str(workdir)), attempt=0)
    assert handle.launch_id.endswith("attempt-0.1")
    wait_for(lambda: len(runs(workdir)) == 2, "both replicas to run")
    (workdir / "go").write_text("")
    assert wait_ended(backend, handle).succeeded
    assert runs(workdir) == ["0", "1"]


def test_supervisor_that_starts_after_its_replica_was_fenced_runs_nothing(
        data_dir: Path, n1: Node, workdir: Path) -> None:
    """The race a kill leaves: a supervisor started by the dead plane that had not yet claimed
    its replica when the restarted plane fenced it."""
    rdir = data_dir / "jobs/j1/attempt-0/replica-0"
    rdir.mkdir(parents=True)
    (rdir / "spec.json").write_text(json.dumps(
        {"command": python(RUNNER), "workdir": str(workdir), "env": {"ROTA_REPLICA_RANK": "0"}}))
    assert LocalBackend(data_dir, node=n1).recover(a_job("j1"), placement([0]), 0) is None
    late = subprocess.run([sys.executable, "-m", "rota.backends.shim", str(rdir)], timeout=60)
    assert late.returncode == 0
    assert runs(workdir) == []
    assert "fenced" in json.loads((rdir / "supervisor.json").read_text())


@pytest.mark.parametrize("claim_first", [True, False], ids=["supervisor-first", "fence-first"])
def test_exactly_one_of_supervisor_and_fence_owns_a_replica(
        data_dir: Path, n1: Node, workdir: Path, claim_first: bool) -> None:
    rdir = data_dir / "jobs/j1/attempt-0/replica-0"
    rdir.mkdir(parents=True)
    (rdir / "spec.json").write_text(json.dumps(
        {"command": python(RUNNER), "workdir": str(workdir), "env": {"ROTA_REPLICA_RANK": "0"}}))
    backend = LocalBackend(data_dir, node=n1)
    if claim_first:
        shim = subprocess.Popen([sys.executable, "-m", "rota.backends.shim", str(rdir)])
        wait_for(lambda: runs(workdir), "the supervisor to run its command")
        handle = backend.recover(a_job("j1"), placement([0]), 0)
        assert handle is not None and proc(handle.replicas[0]).pid == shim.pid
        assert is_running(shim.pid, proc(handle.replicas[0]).start_ticks)
        (workdir / "go").write_text("")
        shim.wait(timeout=60)
        assert wait_ended(backend, handle).succeeded
    else:
        assert backend.recover(a_job("j1"), placement([0]), 0) is None
        subprocess.run([sys.executable, "-m", "rota.backends.shim", str(rdir)], timeout=60)
    assert runs(workdir) == (["0"] if claim_first else [])
