"""The snapshot carries what placement by time to first batch reads, on SQLite and
PostgreSQL: each node's dataset cache (``Node.cache``), the datasets a pending job names
(``Job.datasets``) and those datasets' versions and sizes (``Snapshot.datasets``); a cached
snapshot sees a cache change as a fresh one does."""

from __future__ import annotations

from dataclasses import replace

from rota.core import Queue
from rota.core.datasets import Dataset
from rota.store import Store
from rota.store.datasets import Cached
from storekit import seed, submission


def test_the_snapshot_carries_node_caches_and_the_datasets_jobs_name(db_url, clock):
    store = seed(Store.open(db_url, clock=clock))
    try:
        store.put_queue(Queue("default"))
        store.datasets.create(Dataset("imagenet", "p", "/shared/imagenet", "3", 52_000, "alice"))
        store.datasets.create(Dataset("coco", "p", "/shared/coco", "1", None, "alice"))
        plain = store.submit(submission(queue="default"))
        reads = store.submit(replace(submission(queue="default"),
                                     run={"command": ["x"], "datasets": ["imagenet"]}))
        before = store.snapshot(1.0)
        assert before.nodes[0].cache == {}
        store.datasets.record_node("n1", [Cached("n1", "imagenet", "3", 40_000, 2.0)])
        snap = store.snapshot(2.0)
        assert snap.nodes[0].cache == {"imagenet@3": 40_000}
        jobs = {j.id: j for j in snap.jobs}
        assert jobs[plain].datasets == () and jobs[reads].datasets == ("imagenet",)
        assert {k: (d.version, d.size_bytes) for k, d in snap.datasets.items()} == {
            "imagenet": ("3", 52_000)}
    finally:
        store.close()
