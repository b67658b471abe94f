"""Helpers for the API tests, importable by name from any test module (a ``conftest`` module
is not: with several test directories in one run, another directory's may be the one loaded)."""

from __future__ import annotations

from typing import Any

from rota.core import GpuDevice, Node, Queue
from rota.store import Store


def job_file(**changes: Any) -> dict[str, Any]:
    """A valid job file as JSON; ``changes`` replace or add top-level keys."""
    body = {"name": "train", "project": "p", "queue": "q", "entrypoint": "python train.py",
            "resources": {"gpu": 1, "cpu": 2, "memory": "8Gi"}}
    body.update(changes)
    return body


def seed_tenants(store: Store, gpus: int = 2, token: str = "t") -> dict[str, str]:
    """Projects p and q, their members alice and bob, the operator root, queue q and node n1
    with ``gpus`` H100s; each user's token (named ``token``), by user."""
    for p in ("p", "q"):
        store.create_project(p)
    store.create_user("alice", ["p"])
    store.create_user("bob", ["q"])
    store.create_user("root")
    store.put_queue(Queue("q"))
    store.upsert_nodes([Node("n1", 64_000, 512 * 1024,
                             tuple(GpuDevice(i, "H100", 81920) for i in range(gpus)))], "local")
    return {u: store.issue_token(u, token, role="operator" if u == "root" else "member").token
            for u in ("alice", "bob", "root")}
