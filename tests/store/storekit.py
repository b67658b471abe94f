"""Helpers for the store tests: a hand-moved clock and a small seeded cluster."""

from __future__ import annotations

from rota.core import GpuDevice, Node, Queue
from builders import job
from rota.store import Store, Submission


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, t: float = 1_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> float:
        self.t += seconds
        return self.t


GiB = 1024


def seed(store: Store, gpus: int = 8, members: dict[str, list[str]] | None = None) -> Store:
    """Projects p and q, users alice (in p) and bob (in q), queue q, node n1 with ``gpus``."""
    store.create_project("p")
    store.create_project("q", weight=2.0)
    for user, projects in (members or {"alice": ["p"], "bob": ["q"]}).items():
        store.create_user(user, projects)
    store.put_queue(Queue("q"))
    devices = tuple(GpuDevice(i, "H100-80GB", 80 * GiB, uuid=f"GPU-n1-{i}") for i in range(gpus))
    store.upsert_nodes([Node("n1", 64_000, 512 * GiB, devices)], backend="local")
    return store


def submission(gpus: float = 1, user: str = "alice", project: str = "p", name: str = "",
               **fields: object) -> Submission:
    """A submission built with the job builder: ``submission(2, priority=10, walltime_s=60)``."""
    builder = job("x").gpus(gpus).user(user).project(project)
    for key, value in fields.items():
        getattr(builder, key)(value)
    return Submission.from_job(builder.build(), name=name)
