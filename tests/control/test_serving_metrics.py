"""The serving runtime's figures as Prometheus reads them (``rota.control.servingmetrics``)."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from rota.backends.local import LocalBackend
from rota.control.servingmetrics import ServingMetrics
from rota.control.serving import Serving, Unavailable
from rota.core import GpuDevice, JobKind, Node, Queue, ReplicaRequest
from rota.core.serving import ServiceSettings
from rota.store import Store, Submission


@pytest.fixture
def serving(tmp_path):
    store = Store.open(tmp_path / "db")
    store.create_project("p")
    store.create_user("alice", ["p"])
    store.put_queue(Queue("q"))
    store.upsert_nodes([Node("n1", 8000, 16384, (GpuDevice(0, "H100", 81920),))], "local")
    backend = LocalBackend(tmp_path / "data", node=store.list_nodes()[0][0])
    made = store.services.create("tiny", ServiceSettings(("tiny",), max_replicas=2,
                                                         timeout_s=0.2), Submission(
        project="p", queue="q", user="alice", request=ReplicaRequest(), kind=JobKind.SERVICE,
        run={"command": ["true"], "port": 0}))
    runtime = Serving(store, backend, lambda: None)
    runtime.created(made)
    yield runtime
    store.close()


def scrape(serving: Serving) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(ServingMetrics(serving))
    found = {}
    for line in generate_latest(registry).decode().splitlines():
        if not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            found[name] = float(value)
    return found


def test_a_request_that_found_no_replica_is_counted_and_a_replica_is_wanted(serving):
    assert scrape(serving)['rota_service_replicas{service="tiny",state="live"}'] == 0

    async def ask() -> None:
        waiting = asyncio.ensure_future(serving.acquire("tiny"))
        await asyncio.sleep(0.05)
        # the runtime's tick, as its thread runs it: it sees the request waiting and submits a
        # replica job
        await asyncio.to_thread(serving.tick)
        with pytest.raises(Unavailable):  # nothing runs the replica job here
            await waiting
    asyncio.run(ask())
    seen = scrape(serving)
    assert seen['rota_service_requests_total{service="tiny"}'] == 1
    assert seen['rota_service_cold_starts_total{service="tiny"}'] == 1
    assert seen['rota_service_replicas{service="tiny",state="desired"}'] == 1
    assert seen['rota_service_replicas{service="tiny",state="live"}'] == 1
    assert seen['rota_service_replicas{service="tiny",state="ready"}'] == 0
    assert seen['rota_service_requests_queued{service="tiny"}'] == 0
