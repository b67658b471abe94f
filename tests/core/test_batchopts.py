"""A queue's batch options and a job's choices among them (``rota.core.batchopts``): the
queue's partition and QOS fill what a job leaves out; a choice the queue does not list is
refused naming the field, the queue and what it allows."""

from __future__ import annotations

import pytest

from rota.core import InvalidSpec
from rota.core.batchopts import QueueBatch, read_options, resolve

GPU = QueueBatch(partition="gpu", qos="normal", allow_partition=("debug",),
                 allow_qos=("long",), allow_reservation=("maint",))


@pytest.mark.parametrize("asked, runs_with", [
    ({}, {"partition": "gpu", "qos": "normal"}),                 # the queue's
    ({"qos": "long"}, {"partition": "gpu", "qos": "long"}),      # a listed choice
    ({"partition": "gpu"}, {"partition": "gpu", "qos": "normal"}),  # the queue's own: allowed
    ({"partition": "debug", "reservation": "maint"},
     {"partition": "debug", "qos": "normal", "reservation": "maint"}),
], ids=["queue", "choice", "own", "reservation"])
def test_a_job_runs_with_its_queues_options_and_its_allowed_choices(asked, runs_with):
    assert resolve("research", GPU, asked) == runs_with


@pytest.mark.parametrize("queue, asked, field, reason", [
    (GPU, {"qos": "high"}, "slurm.qos",
     "'high' is not allowed: queue research lets its jobs choose only normal, long"),
    (GPU, {"reservation": "other"}, "slurm.reservation",
     "queue research lets its jobs choose only maint"),
    (GPU, {"constraint": "a100"}, "slurm.constraint",
     "queue research does not let its jobs choose a node constraint"),
    (None, {"partition": "gpu"}, "slurm.partition",
     "queue research lets its jobs choose none (its slurm.allow.partition is empty)"),
    (GPU, {"partition": "no such"}, "slurm.partition", "expected a name"),
], ids=["qos", "reservation", "constraint", "no-section", "bad-name"])
def test_a_choice_the_queue_does_not_allow_is_refused_naming_it(queue, asked, field, reason):
    with pytest.raises(InvalidSpec) as caught:
        resolve("research", queue, asked)
    assert caught.value.field == field and reason in caught.value.reason


def test_a_queue_allowing_constraints_passes_the_jobs_on():
    queue = QueueBatch(allow_constraint=True)
    assert resolve("q", queue, {"constraint": "a100&ib"}) == {"constraint": "a100&ib"}


def test_a_queues_options_read_back_equal_from_their_stored_form():
    assert QueueBatch.read(GPU.stored()) == GPU and QueueBatch.read(None) is None


@pytest.mark.parametrize("value, field", [
    ("gpu", "run.slurm"), ({"partition": 3}, "run.slurm.partition"),
    ({"queue": "x"}, "run.slurm.queue"), ({"constraint": "-x"}, "run.slurm.constraint"),
])
def test_stored_options_that_cannot_be_read_name_their_field(value, field):
    with pytest.raises(InvalidSpec) as caught:
        read_options(value, "run.slurm")
    assert caught.value.field == field


def test_a_launch_spec_keeps_its_options_through_its_stored_form():
    from rota.core.runspec import read_run

    run = read_run({"version": 2, "command": ["true"],
                    "slurm": {"partition": "gpu", "constraint": "a100&ib"}})
    assert dict(run.slurm) == {"partition": "gpu", "constraint": "a100&ib"}
    assert read_run(run.stored()) == run
    assert "slurm" not in read_run({"version": 2, "command": ["true"]}).stored()
