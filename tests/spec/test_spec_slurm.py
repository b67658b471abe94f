"""The ``slurm`` sections of a queues file's queue and of a job file: what they accept, and
every mistake named by its field."""

from __future__ import annotations

import pytest
from specdata import base_job

from rota.core import InvalidSpec
from rota.core.batchopts import QueueBatch
from rota.spec import build_queues, parse_job


def queues(slurm):
    return build_queues({"queues": [{"name": "research", "slurm": slurm}]}, ["default"])


def test_a_queues_slurm_section_is_stored_with_its_choices():
    applied = queues({"partition": "gpu", "qos": "normal",
                      "allow": {"partition": ["debug"], "qos": ["long"],
                                "reservation": ["maint"], "constraint": True}})
    assert QueueBatch.read(applied.slurm["research"]) == QueueBatch(
        "gpu", "normal", ("debug",), ("long",), ("maint",), True)


def test_a_queue_without_one_stores_none():
    assert build_queues({"queues": [{"name": "q"}]}, ["default"]).slurm == {"q": None}


@pytest.mark.parametrize("slurm, field", [
    ({"partition": "a b"}, "queues[0].slurm.partition"),
    ({"account": "x"}, "queues[0].slurm.account"),
    ({"allow": {"qos": ["ok", "-bad"]}}, "queues[0].slurm.allow.qos.1"),
    ({"allow": {"constraint": ["a100"]}}, "queues[0].slurm.allow.constraint"),
], ids=["partition", "unknown-key", "allow-name", "allow-constraint"])
def test_a_bad_queue_section_names_its_field(slurm, field):
    with pytest.raises(InvalidSpec) as caught:
        queues(slurm)
    assert caught.value.field == field


def test_a_job_files_slurm_section_lists_what_it_asks_for():
    spec = parse_job(base_job(slurm={"partition": "debug", "constraint": "a100&ib"}))
    assert spec.slurm.options() == {"partition": "debug", "constraint": "a100&ib"}


@pytest.mark.parametrize("slurm, field", [
    ({"account": "x"}, "slurm.account"),
    ({"qos": "no qos"}, "slurm.qos"),
    ({"constraint": "--x"}, "slurm.constraint"),
], ids=["account-is-the-sites", "qos", "constraint"])
def test_a_bad_job_section_names_its_field(slurm, field):
    with pytest.raises(InvalidSpec) as caught:
        parse_job(base_job(slurm=slurm))
    assert caught.value.field == field
