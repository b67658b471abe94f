"""A queue's ``slurm`` section, applied from a queues file, decides at submit what a job runs
with: the queue's partition and QOS, the job's allowed choices, and a selector that keeps a job
on its partition's nodes; a choice the queue does not allow is refused and nothing is stored."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rota.core import InvalidSpec
from rota.spec import build_queues
from storekit import seed, submission

QUEUES = {"queues": [
    {"name": "gpu", "slurm": {"partition": "high", "qos": "gold",
                              "allow": {"qos": ["normal"], "reservation": ["maint"]}}},
    {"name": "plain"},
]}


def applied(store):
    seed(store)
    queues = build_queues(QUEUES, ["default"], {}, ["p", "q"])
    store.apply_queue_set(queues.flavors.values(),
                          {n: (q, queues.bindings[n]) for n, q in queues.queues.items()},
                          queues.idle, queues.slurm)
    return store


def submit(store, queue, slurm=None):
    sub = submission(1)
    run = {"command": ["true"], **({"slurm": slurm} if slurm is not None else {})}
    return store.get_job(store.submit(replace(sub, queue=queue, run=run)))


def test_a_job_takes_its_queues_partition_and_qos_and_stays_on_the_partitions_nodes(store):
    rec = submit(applied(store), "gpu")
    assert rec.run["slurm"] == {"partition": "high", "qos": "gold"}
    assert dict(rec.job.selector) == {"slurm.partition.high": "true"}


def test_an_allowed_choice_replaces_the_queues(store):
    rec = submit(applied(store), "gpu", {"qos": "normal", "reservation": "maint"})
    assert rec.run["slurm"] == {"partition": "high", "qos": "normal", "reservation": "maint"}


def test_a_queue_without_a_slurm_section_gives_nothing(store):
    rec = submit(applied(store), "plain")
    assert "slurm" not in rec.run and dict(rec.job.selector) == {}


@pytest.mark.parametrize("queue, slurm, field, reason", [
    ("gpu", {"qos": "high"}, "slurm.qos",
     "'high' is not allowed: queue gpu lets its jobs choose only gold, normal"),
    ("plain", {"partition": "debug"}, "slurm.partition", "queue plain lets its jobs choose none"),
], ids=["not-listed", "no-section"])
def test_a_choice_the_queue_does_not_allow_is_refused_and_nothing_stored(store, queue, slurm,
                                                                         field, reason):
    applied(store)
    with pytest.raises(InvalidSpec) as caught:
        submit(store, queue, slurm)
    assert caught.value.field == field and reason in caught.value.reason
    assert store.list_jobs().items == ()
