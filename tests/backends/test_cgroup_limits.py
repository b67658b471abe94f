"""The local backend's cgroups with real processes (``rota.backends.cgroups``): a CPU quota
from the CPUs a job asked for, read back from the kernel's own accounting; a cgroup whose
supervisor was killed is removed, with what still ran in it, by the control plane that polls it
and by the next one to start; where cgroups cannot be written (a control plane that is not
root) the node says that limits are not enforced, and why.

Skipped where this machine's cgroups cannot be written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import rota
from backend_support import placement, poll_one, python, run, wait_for, wait_started
from requires import expected_cgroup_version
from rota.backends import cgroups
from rota.backends.base import ReplicaState
from rota.backends.local import LocalBackend, proc
from rota.backends.procs import is_running, start_ticks
from rota.core import Job, Node, ReplicaRequest

BUSY = "while True: pass"
SLEEPER = "import time; time.sleep(120)"

SOURCE = str(Path(rota.__file__).resolve().parent.parent)  # this rota, for /usr/bin/python3


@pytest.fixture(autouse=True)
def _cgroups(tmp_path: Path) -> None:
    found = cgroups.detect(tmp_path / "probe")
    if isinstance(found, str):
        pytest.skip(f"cgroups are not usable here: {found}")
    found.close()
    expected_cgroup_version(found.version)


def request(cpu_milli: int = 1000, memory_mib: int = 256) -> Job:
    return Job("j1", "p", "q", ReplicaRequest(cpu_milli, memory_mib))


def plan_of(handle) -> dict:
    spec = json.loads((Path(proc(handle.replicas[0]).dir) / "spec.json").read_text())
    assert spec["cgroup"] is not None, "the replica was given no cgroup"
    return spec["cgroup"]


def test_half_a_cpu_is_a_quota_of_half_a_cpu(backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(request(cpu_milli=500), placement([]), run(python(BUSY), str(workdir)))
    wait_started(handle)
    plan = plan_of(handle)
    cpu = Path(plan["dirs"]["cpu" if plan["version"] == 1 else ""])
    if plan["version"] == 1:
        assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "50000"
        assert (cpu / "cpu.cfs_period_us").read_text().strip() == "100000"
    else:
        assert (cpu / "cpu.max").read_text().split() == ["50000", "100000"]
    used0, wall0 = cgroups.usage_s(plan), time.monotonic()
    assert used0 is not None, "no CPU accounting for the replica's cgroup"
    time.sleep(3.0)
    used, wall = cgroups.usage_s(plan) - used0, time.monotonic() - wall0
    # a busy loop would use 1 CPU-second a second; its quota lets it have 0.5 (plus a period)
    assert used <= 0.5 * wall + 0.25, (used, wall)
    # and the kernel held it back (on a machine too busy to give it half a CPU, later)
    wait_for(lambda: _field((cpu / "cpu.stat").read_text(), "nr_throttled") > 0,
             "the kernel to throttle the busy loop")
    backend.cancel(handle, 0)


def _field(text: str, name: str) -> int:
    return int(text.split(f"{name} ")[1].split()[0])


def test_the_cgroup_of_a_replica_whose_supervisor_was_killed_is_removed_with_its_processes(
        backend: LocalBackend, workdir: Path) -> None:
    handle = backend.launch(request(), placement([]), run(python(SLEEPER), str(workdir)))
    (child,) = wait_started(handle)
    dirs = list(plan_of(handle)["dirs"].values())
    os.kill(proc(handle.replicas[0]).pid, signal.SIGKILL)  # nobody left to clean up
    ticks = start_ticks(child)
    wait_for(lambda: poll_one(backend, handle).state is ReplicaState.LOST, "the replica lost")
    wait_for(lambda: not is_running(child, ticks), "the orphaned command to be killed")
    assert not any(os.path.isdir(d) for d in dirs)


def test_a_restarted_backend_removes_the_cgroups_of_replicas_that_ended_while_it_was_down(
        data_dir: Path, n1: Node, workdir: Path) -> None:
    first = LocalBackend(data_dir, node=n1)
    ended = first.launch(request(), placement([]), run(python(SLEEPER), str(workdir)))
    (child,) = wait_started(ended)
    running = first.launch(Job("j2", "p", "q", ReplicaRequest(1000, 256)), placement([]),
                           run(python(SLEEPER), str(workdir)))
    wait_started(running)
    supervisor = proc(ended.replicas[0])
    os.kill(supervisor.pid, signal.SIGKILL)
    wait_for(lambda: not is_running(supervisor.pid, supervisor.start_ticks), "its end")
    ticks = start_ticks(child)
    LocalBackend(data_dir, node=n1)  # a new control plane over the same data directory
    wait_for(lambda: not is_running(child, ticks), "the orphaned command to be killed")
    assert not any(os.path.isdir(d) for d in plan_of(ended)["dirs"].values())
    assert all(os.path.isdir(d) for d in plan_of(running)["dirs"].values())  # adopted
    first.cancel(running, 0)


def test_a_control_plane_that_may_not_write_cgroups_says_limits_are_not_enforced() -> None:
    """``nobody`` runs the backend (through /usr/bin/python3, which every account may run), in
    a directory of its own under /tmp (pytest's are closed to other accounts)."""
    root = Path(tempfile.mkdtemp(prefix="rota-limits-"))
    try:
        root.chmod(0o777)
        code = ("from rota.backends.local import LocalBackend; from rota.core import Node; "
                f"b = LocalBackend({str(root / 'data')!r}, node=Node('n1', 1000, 1024, ())); "
                "print(b.inventory()[0].labels.get('rota.dev/job-limits'))")
        done = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                              user="nobody", group="nogroup", extra_groups=[], timeout=60,
                              env={**os.environ, "HOME": str(root), "PYTHONPATH": SOURCE})
    finally:
        shutil.rmtree(root)
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip()
    assert said.startswith("not enforced: cannot create this control plane's cgroups: "), said
