"""The snapshot carries what placement by time to first batch reads, on SQLite and
PostgreSQL: each node's dataset cache (``Node.cache``), the datasets a pending job names
(``Job.datasets``) and those datasets' versions and sizes (``Snapshot.datasets``); a cached
snapshot sees a cache change as a fresh one does; a job that waits for the node caching its
data is stored with the reason ``rota show`` words."""

from __future__ import annotations

from dataclasses import replace

from rota.core import GpuDevice, JobState, Node, Queue
from rota.core.datasets import Dataset
from rota.core.jobwords import why_lines
from rota.core.wording import reason_json
from rota.scheduler import build_policy, run_cycle
from rota.store import Store
from rota.store.datasets import Cached
from storekit import seed, submission

POLICY = build_policy("besteffort")


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


def test_a_wait_for_a_warm_node_is_stored_with_its_reason_as_rota_show_tells_it(db_url, clock):
    store = seed(Store.open(db_url, clock=clock))
    try:
        gpus = tuple(GpuDevice(i, "H100-80GB", 80 * 1024, uuid=f"GPU-n2-{i}") for i in range(8))
        store.upsert_nodes([Node("n2", 64_000, 512 * 1024, gpus)], backend="local")
        store.put_queue(Queue("default"))
        store.datasets.create(Dataset("imagenet", "p", "/shared/imagenet", "1", 52 * 10 ** 9,
                                      "alice"))
        busy = store.submit(submission(8, queue="default"))
        first = store.snapshot(1.0)
        assert store.apply(run_cycle(first, POLICY, 1.0), 1.0).bound == (busy,)
        node = store.get_job(busy).job.placement.nodes[0]
        store.datasets.record_node(node, [Cached(node, "imagenet", "1", 52 * 10 ** 9, 1.0)])
        reads = store.submit(replace(submission(4, queue="default"),
                                     run={"command": ["x"], "datasets": ["imagenet"]}))
        submitted = store.get_job(reads).job.submit_time
        now = submitted + 12.0
        store.apply(run_cycle(store.snapshot(now), POLICY, now), now)
        # the other node is free but cold: 52 GB at 1 GB/s; it has waited 12 s of 52
        view = store.get_job(reads)
        assert view.job.state is JobState.PENDING
        assert why_lines({"wait_reasons": [reason_json(r) for r in view.wait_reasons]}) == [
            f"Waits up to 40s for node {node}, which holds its dataset imagenet; starting "
            "cold elsewhere would cost 52s to copy."]
        later = submitted + 52.0
        assert store.apply(run_cycle(store.snapshot(later), POLICY, later), later).bound == (
            reads,)
    finally:
        store.close()
