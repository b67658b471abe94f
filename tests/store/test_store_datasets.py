"""Datasets in the store, on SQLite and PostgreSQL: declared in an existing project by its
members, named by jobs of that project only, kept while a live job names them; what each
node's cache holds replaced per node, counted per project against its quota."""

from dataclasses import replace

import pytest

from rota.core import InvalidSpec, JobState, Queue
from rota.core.datasets import Dataset
from rota.store import AlreadyExists, NotFound
from rota.store.errors import InUse
from rota.store.datasets import Cached
from storekit import submission


@pytest.fixture
def tenants(store):
    store.create_project("p")
    store.create_project("q")
    store.create_user("alice", ["p"])
    store.create_user("bob", ["q"])
    store.put_queue(Queue("default"))
    return store


def naming(*names: str):
    return replace(submission(queue="default"), run={"command": ["x"], "datasets": list(names)})


def ds(name="d", project="p", size=100, user="alice", version="1") -> Dataset:
    return Dataset(name, project, "/shared/" + name, version, size, user, 5.0)


def test_a_dataset_is_declared_once_by_a_member_of_its_project(tenants):
    made = tenants.datasets.create(ds(), member=True)
    assert made == tenants.datasets.get("d") == ds()
    assert [d.name for d in tenants.datasets.list()] == ["d"]
    with pytest.raises(AlreadyExists):
        tenants.datasets.create(ds(), member=True)
    with pytest.raises(InvalidSpec) as caught:
        tenants.datasets.create(ds("e", project="q"), member=True)
    assert caught.value.field == "project"
    with pytest.raises(InvalidSpec) as caught:
        tenants.datasets.create(ds("e", project="nope"))
    assert caught.value.field == "project"


def test_jobs_name_datasets_of_their_project_and_keep_them_from_removal(tenants):
    tenants.datasets.create(ds())
    tenants.datasets.create(ds("other", project="q", user="bob"))
    job = tenants.submit(naming("d"))
    for names, field in ((["nothing"], "datasets.0"), (["d", "other"], "datasets.1")):
        with pytest.raises(InvalidSpec) as caught:
            tenants.submit(naming(*names))
        assert caught.value.field == field
    with pytest.raises(InUse) as caught:
        tenants.datasets.remove("d")
    assert caught.value.code == "dataset_in_use" and f"live jobs {job}" in str(caught.value)
    tenants.request_cancel(job, by="alice")
    assert tenants.get_job(job).state is JobState.CANCELLED
    tenants.datasets.remove("d")
    with pytest.raises(NotFound):
        tenants.datasets.get("d")


def test_node_caches_are_replaced_per_node_and_counted_against_the_quota(tenants):
    tenants.datasets.create(ds("a", size=60))
    tenants.datasets.create(ds("b", size=50))
    tenants.datasets.set_quota("p", 100)
    tenants.datasets.record_node("n1", [Cached("n1", "a", "1", 60, 7.0)])
    tenants.datasets.record_node("n2", [Cached("n2", "a", "1", 60, 8.0)])
    assert tenants.datasets.quota("p") == (100, 120)
    # b on n1: 120 + 50 > 100; a again on n1 costs nothing more
    with pytest.raises(InvalidSpec) as caught:
        tenants.datasets.for_launch(["b"], ["n1"])
    assert "over its quota of 100" in caught.value.reason
    found, wanted = tenants.datasets.for_launch(["a"], ["n1"])
    assert [d.name for d in found] == ["a"] and wanted == frozenset()
    tenants.datasets.record_node("n2", [])
    tenants.datasets.record_node("n1", [Cached("n1", "b", "1", 50, 9.0)])
    assert [(c.node, c.dataset) for c in tenants.datasets.caches()] == [("n1", "b")]
    assert tenants.datasets.quota("p") == (100, 50)
    with pytest.raises(InvalidSpec) as caught:
        tenants.datasets.create(ds("huge", size=101))
    assert caught.value.field == "size"
    tenants.datasets.set_quota("p", None)
    assert tenants.datasets.quota("p") == (None, 50)


def test_what_live_jobs_name_is_wanted(tenants):
    tenants.datasets.create(ds("a"))
    tenants.datasets.create(ds("b", version="2"))
    tenants.submit(naming("b"))
    assert tenants.datasets.for_launch(["a"], ["n1"])[1] == frozenset({"b@2"})
