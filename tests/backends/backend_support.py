"""Helpers for backend tests: placements on node ``n1``, waits with deadlines, cleanup."""

from __future__ import annotations

import json
import os
import signal
import sys
from functools import partial
from pathlib import Path

from builders import job
from waiting import poll
from rota.backends import cgroups
from rota.backends.base import Handle, LaunchSpec, ReplicaState, Status
from rota.backends.local import LocalBackend, proc
from rota.backends.procs import is_running, read_json
from rota.core import DeviceShare, Job, Placement, ReplicaPlacement

NODE = "n1"
DEADLINE_S = 20.0  # generous: the machine may be loaded; tests never assert how long it took


wait_for = partial(poll, timeout=DEADLINE_S)


def wait_ended(backend: LocalBackend, handle: Handle) -> Status:
    def ended() -> Status | None:
        (status,) = backend.poll([handle])
        return status if status.state is not ReplicaState.RUNNING else None
    return wait_for(ended, f"job {handle.job_id} to end")  # type: ignore[return-value]


def placement(*replicas: list[int] | tuple[int, int, int]) -> Placement:
    """Replicas on ``n1``: a list of whole device indices, or (index, milli, memory MiB)."""
    reps = []
    for rep in replicas:
        if isinstance(rep, tuple):
            reps.append(ReplicaPlacement(NODE, (DeviceShare(*rep),)))
        else:
            reps.append(ReplicaPlacement(NODE, tuple(DeviceShare(i, 1000, 81920) for i in rep)))
    return Placement(tuple(reps))


def a_job(id: str = "j1", replicas: int = 1) -> Job:
    return job(id).replicas(replicas).build()


def run(command: list[str] | str, workdir: str, env: dict[str, str] | None = None) -> LaunchSpec:
    """What to launch: ``command`` (argv, or a string for ``/bin/sh -c``) in ``workdir``."""
    return LaunchSpec(command if isinstance(command, str) else tuple(command),  # type: ignore[arg-type]
                      workdir, env or {})


def poll_one(backend: LocalBackend, handle: Handle) -> Status:
    (status,) = backend.poll([handle])
    return status


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def kill_everything_under(data_dir: Path) -> None:
    for handle_file in data_dir.glob("jobs/*/attempt-*/handle.json"):
        for rep in json.loads(handle_file.read_text())["replicas"]:
            ref = rep["ref"]
            if is_running(ref["pid"], ref["start_ticks"]):
                os.kill(ref["pid"], signal.SIGKILL)
    for child_file in data_dir.glob("jobs/*/attempt-*/replica-*/child.json"):
        child = json.loads(child_file.read_text())
        if is_running(child["pid"], child["start_ticks"]):
            try:
                os.killpg(child["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
    release_cgroups_under(data_dir)


def release_cgroups_under(data_dir: Path) -> None:
    """Remove the cgroups of the replicas under ``data_dir`` (killing what runs in them),
    then their bases (``rota.backends.cgroups``), so that no test leaves one behind."""
    bases = set()
    for spec_file in data_dir.glob("jobs/*/attempt-*/replica-*/spec.json"):
        try:
            plan = (read_json(spec_file) or {}).get("cgroup")
        except (ValueError, AttributeError):  # not a spec the backend wrote (a test's own)
            continue
        if plan:
            cgroups.release(list(plan["dirs"].values()))
            bases |= {os.path.dirname(d) for d in plan["dirs"].values()}
    for base in bases:
        try:
            os.rmdir(base)
        except OSError:
            pass


def wait_started(handle: Handle) -> list[int]:
    """Wait until every replica's command runs; its pids (each leads its own session)."""
    def pids() -> list[int] | None:
        found = [read_json(Path(proc(r).dir) / "child.json") for r in handle.replicas]
        return None if None in found else [c["pid"] for c in found]  # type: ignore[index]
    return wait_for(pids, f"job {handle.job_id} to start")  # type: ignore[return-value]
