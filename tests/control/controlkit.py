"""Helpers for the control loop tests: a hand-moved clock, a seeded store, submissions with a
``run`` mapping, and driving passes until something holds (with a deadline, never a fixed
sleep)."""

from __future__ import annotations

import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any, Callable

from builders import job
from waiting import poll
from rota.backends.base import Handle, LaunchSpec
from rota.backends.local import LocalBackend
from rota.control import ControlLoop
from rota.core import JobState, Queue
from rota.store import JobRecord, Store, Submission

DEADLINE_S = 30.0  # generous: the machine may be loaded; no test asserts how long it took


class HeldLaunches(LocalBackend):
    """The local backend, whose launches of the jobs in ``held`` wait until ``release`` (a
    slow API server, a launch the test looks at while it is under way); ``entered`` names
    every job whose launch began."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.held: set[str] = set()
        self.entered: set[str] = set()
        self._go = threading.Event()

    def release(self) -> None:
        self._go.set()

    def launch(self, job, placement, spec: LaunchSpec, attempt: int) -> Handle:
        self.entered.add(str(job.id))
        if str(job.id) in self.held:
            assert self._go.wait(30), "the test never released the launch"
        return super().launch(job, placement, spec, attempt)


class FakeClock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def seeded_store(store: Store, backend: LocalBackend) -> Store:
    """Project p with user alice, an unlimited queue q, the backend's node."""
    store.create_project("p")
    store.create_user("alice", ["p"])
    store.put_queue(Queue("q"))
    store.upsert_nodes(backend.inventory(), backend="local")
    return store


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def submit(store: Store, command: list[str] | str | None, gpus: float = 1, replicas: int = 1,
           priority: int = 0, grace_s: float = 30.0, walltime_s: float | None = None,
           **run: Any) -> str:
    builder = job("x").gpus(gpus).user("alice").project("p").queue("q").replicas(replicas)
    builder = builder.priority(priority).grace_s(grace_s)
    built = (builder.walltime(walltime_s) if walltime_s is not None else builder).build()
    spec = dict(run)
    if command is not None:
        spec["command"] = command
    return store.submit(Submission.from_job(built, run=spec))


def drive(loop: ControlLoop, until: Callable[[], Any], what: str,
          tick: Callable[[], None] = lambda: None, timeout: float = DEADLINE_S) -> Any:
    """Run passes until ``until()`` is truthy; ``tick`` runs between passes (move a clock)."""
    def passed() -> Any:
        loop.step()
        value = until()
        if not value:
            tick()
        return value
    return poll(passed, what, timeout)


# wait for ``until()`` without running passes (a background loop runs them)
wait_until = partial(poll, timeout=DEADLINE_S)


def state_is(store: Store, job_id: str, *states: JobState) -> Callable[[], JobRecord | None]:
    def check() -> JobRecord | None:
        rec = store.get_job(job_id)
        return rec if rec.state in states else None
    return check


def workdir(data_dir: Path, job_id: str) -> Path:
    return data_dir / "jobs" / job_id / "work"


def reasons(store: Store, job_id: str) -> list[str]:
    return [str(e.data.get("reason", "")) for e in store.events(job_id) if e.kind == "state"]
