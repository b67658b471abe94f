"""The cluster file: round trips into core objects, and every rule names its field."""

from __future__ import annotations

import pytest
from specdata import base_cluster, running, setin

from rota.core import InvalidSpec
from rota.core import JobState, ReclaimWithinCohort, WithinQueue
from rota.spec import build_cluster, parse_yaml

GIB = 1024


def with_running(*jobs):
    data = base_cluster()
    data["running"] = list(jobs)
    return data


def test_round_trip_nodes_devices_and_stamping():
    c = build_cluster(base_cluster())
    nodes = {n.name: n for n in c.snapshot.nodes}
    assert list(nodes) == ["h-0", "h-1", "l4"]          # count: 2 stamps h-0 and h-1
    h0 = nodes["h-0"]
    assert (h0.cpu_milli, h0.memory_mib) == (64_000, 512 * GIB)
    assert [d.index for d in h0.devices] == list(range(8))
    assert {d.model for d in h0.devices} == {"H100-80GB"}
    assert h0.devices[0].memory_mib == 80 * GIB
    # nvlink: pairs -> (0,1), (2,3), ... share a domain
    assert [d.nvlink for d in h0.devices[:4]] == ["nvl0", "nvl0", "nvl1", "nvl1"]
    assert [d.model for d in nodes["l4"].devices] == ["L4", "L4"]
    assert c.models == ("H100-80GB", "L4")


def test_round_trip_queues_flavors_projects():
    c = build_cluster(base_cluster())
    s = c.snapshot
    research, product = s.queues["research"], s.queues["product"]
    assert research.cohort == "lab"
    assert research.quotas["h100"].nominal == {"gpu": 8000}          # milli-GPU
    assert research.quotas["h100"].borrowing_limit == {"gpu": 4000}
    assert product.quotas["h100"].lending_limit == {"gpu": 2000}
    assert list(product.quotas) == ["h100", "l4"]                   # order kept
    assert research.within_queue is WithinQueue.LOWER_PRIORITY
    assert research.reclaim_within_cohort is ReclaimWithinCohort.ANY
    assert s.flavors["h100"].models == ("*H100*",)
    assert s.flavors["l4"].matches("L4") and "any" in s.flavors
    assert s.projects["vision"].weight == 2 and s.projects["llm"].weight == 1
    assert c.now == 0 and c.policy is None


def test_quota_amounts_cpu_memory_and_fractions():
    data = setin(base_cluster(), "queues.0.quota.h100.nominal",
                 {"gpu": 2.5, "cpu": "500m", "memory": "1Ti"})
    q = build_cluster(data).snapshot.queues["research"].quotas["h100"]
    assert q.nominal == {"gpu": 2500, "cpu": 500, "memory": 1024 * GIB}


def test_preemption_usage_and_now():
    data = setin(base_cluster(), "queues.0.preemption",
                 {"within_queue": "never", "reclaim_within_cohort": "lower-priority"})
    data = setin(data, "projects.0.usage", {"gpu_hours": 10, "as_of": 50})
    c = build_cluster(data)
    q = c.snapshot.queues["research"]
    assert (q.within_queue, q.reclaim_within_cohort) == (WithinQueue.NEVER,
                                                         ReclaimWithinCohort.LOWER_PRIORITY)
    assert c.snapshot.usage["vision"].gpu_seconds == 36_000
    assert c.now == 50                                   # the latest time the file mentions


def test_borrow_within_cohort_and_strict_priority():
    data = setin(base_cluster(), "queues.0.preemption", {"borrow_within_cohort": "lower-priority"})
    data = setin(data, "queues.0.strict_priority", True)
    q = build_cluster(data).snapshot.queues["research"]
    assert (str(q.borrow_within_cohort), q.strict_priority) == ("lower-priority", True)
    other = build_cluster(base_cluster()).snapshot.queues["research"]
    assert (str(other.borrow_within_cohort), other.strict_priority) == ("never", False)


def test_borrow_within_cohort_with_a_priority_threshold():
    data = setin(base_cluster(), "queues.0.preemption", {
        "borrow_within_cohort": "lower-priority", "max_priority_threshold": 10,
        "within_queue": "lower-or-newer-equal-priority"})
    q = build_cluster(data).snapshot.queues["research"]
    assert (q.max_priority_threshold, str(q.within_queue)) == (
        10, "lower-or-newer-equal-priority")
    assert build_cluster(base_cluster()).snapshot.queues["research"].max_priority_threshold is None


def test_preemption_min_runtime():
    data = setin(base_cluster(), "queues.0.preemption", {"min_runtime": "10m"})
    assert build_cluster(data).snapshot.queues["research"].min_runtime_s == 600
    assert build_cluster(base_cluster()).snapshot.queues["research"].min_runtime_s == 0


def test_iso_times():
    data = parse_yaml("now: 2026-03-01T10:00:00Z\n")
    data = {**base_cluster(), **data}
    data["running"] = [running(started_at="2026-03-01T09:00:00+00:00")]
    c = build_cluster(data)
    assert c.now - c.snapshot.jobs[0].started_at == 3600


def test_running_job_round_trip():
    c = build_cluster(with_running(running("r", "h-1", (2, 3), walltime="1h")))
    (job,) = c.snapshot.jobs
    assert job.state is JobState.RUNNING and job.started_at == 100
    assert job.flavor == "h100"                          # first queue flavour covering H100
    rep = job.placement.replicas[0]
    assert rep.node == "h-1"
    assert [(d.index, d.milli, d.memory_mib) for d in rep.devices] == [
        (2, 1000, 80 * GIB), (3, 1000, 80 * GIB)]


def test_running_fraction_share_and_memory():
    frac = running("nb", "l4", (1,), queue="product",
                   resources={"gpu": 0.5, "gpu_model": "L4"})
    other = running("nb2", "l4", (1,), queue="product",
                    resources={"gpu": 0.25}, placement=[{"node": "l4", "gpus": [1],
                                                         "gpu_memory": "4Gi"}])
    c = build_cluster(with_running(frac, other))
    a, b = (j.placement.replicas[0].devices[0] for j in c.snapshot.jobs)
    assert (a.milli, a.memory_mib) == (500, 12 * GIB)    # half of 24Gi by default
    assert (b.milli, b.memory_mib) == (250, 4 * GIB)
    assert c.snapshot.jobs[0].flavor == "l4"


def test_explicit_device_list():
    data = setin(base_cluster(), "nodes.1.gpus", [
        {"index": 0, "model": "L4", "memory": "24Gi", "uuid": "GPU-x", "numa": 1,
         "nvlink": "n", "healthy": False}])
    dev = build_cluster(data).snapshot.nodes[2].devices[0]
    assert (dev.uuid, dev.numa, dev.nvlink, dev.healthy) == ("GPU-x", 1, "n", False)


CASES = [
    # (id, path to change, new value, expected field, words in the reason)
    ("unknown top key", "colour", "red", "colour", "unknown key"),
    ("unknown node key", "nodes.0.gpu", 8, "nodes[0].gpu", "expected one of"),
    ("negative cpu", "nodes.0.cpu", -4, "nodes[0].cpu", "negative"),
    ("bad memory unit", "nodes.0.memory", "12Qb", "nodes[0].memory", "unit"),
    ("missing memory", "nodes.1", {"name": "x", "cpu": 1}, "nodes[1].memory", "required"),
    ("shorthand count zero", "nodes.0.gpus.count", 0, "nodes[0].gpus.count", "greater than"),
    ("nvlink list length", "nodes.0.gpus.nvlink", ["a", "b"], "nodes[0].gpus.nvlink", "one per GPU"),
    ("nvlink word", "nodes.0.gpus.nvlink", "triples", "nodes[0].gpus.nvlink", "pairs"),
    ("numa length", "nodes.0.gpus.numa", [0], "nodes[0].gpus.numa", "one per GPU"),
    ("device memory", "nodes.1.gpus.1.memory", "lots", "nodes[1].gpus[1].memory", "memory size"),
    ("device index repeats", "nodes.1.gpus.1.index", 0, "nodes[1].gpus", "repeat"),
    ("node name", "nodes.1.name", "bad name", "nodes[1].name", "letters"),
    ("duplicate node", "nodes.1.name", "h-1", "nodes[1].name", "already defined by nodes[0]"),
    ("flavour any", "flavors.any", "*", "flavors.any", "built in"),
    ("flavour pattern", "flavors.h100", [], "flavors.h100", "pattern"),
    ("unknown flavour", "queues.0.quota.h200", {"nominal": {"gpu": 1}},
     "queues[0].quota.h200", "unknown flavour"),
    ("quota negative", "queues.0.quota.h100.nominal.gpu", -1,
     "queues[0].quota.h100.nominal.gpu", "must not be negative"),
    ("quota unknown resource", "queues.0.quota.h100.nominal.tpu", 1,
     "queues[0].quota.h100.nominal.tpu", "unknown key"),
    ("lending above nominal", "queues.1.quota.h100.lending_limit.gpu", 9,
     "queues[1].quota.h100.lending_limit.gpu", "above the nominal quota 8 GPU"),
    ("lending without nominal", "queues.1.quota.h100.lending_limit.cpu", 4,
     "queues[1].quota.h100.lending_limit.cpu", "no nominal cpu"),
    ("borrowing without nominal", "queues.0.quota.h100.borrowing_limit.memory", "1Gi",
     "queues[0].quota.h100.borrowing_limit.memory", "no nominal memory"),
    ("duplicate queue", "queues.1.name", "research", "queues[1].name", "already defined"),
    ("within_queue", "queues.0.preemption", {"within_queue": "always"},
     "queues[0].preemption.within_queue",
     "'never', 'lower-priority' or 'lower-or-newer-equal-priority'"),
    ("threshold without borrowing", "queues.0.preemption", {"max_priority_threshold": 5},
     "queues[0].preemption.max_priority_threshold", "only with borrow_within_cohort"),
    ("borrow_within_cohort", "queues.0.preemption", {"borrow_within_cohort": "any"},
     "queues[0].preemption.borrow_within_cohort", "'never' or 'lower-priority'"),
    ("min_runtime", "queues.0.preemption", {"min_runtime": "-5m"},
     "queues[0].preemption.min_runtime", "must not be negative"),
    ("strict_priority", "queues.0.strict_priority", "sometimes",
     "queues[0].strict_priority", "boolean"),
    ("resource group", "queues.0.resource_groups", ["gpu-pool"],
     "queues[0].resource_groups[0]", "no node is in resource group"),
    ("no queues", "queues", [], "queues", "at least 1"),
    ("weight zero", "projects.0.weight", 0, "projects[0].weight", "greater than 0"),
    ("duplicate project", "projects.1.name", "vision", "projects[1].name", "already defined"),
    ("usage negative", "projects.0.usage", {"gpu_hours": -1}, "projects[0].usage.gpu_hours",
     "greater than or equal to 0"),
    ("bad now", "now", "soon", "now", "ISO date-time"),
    ("bad policy preset", "policy", "fastest", "policy", "no preset named 'fastest'"),
    ("bad policy plugin", "policy", {"order": "random"}, "policy.order", "no plugin named"),
    ("bad policy key", "policy", {"speed": 1}, "policy.speed", "unknown key"),
]


@pytest.mark.parametrize("path,value,field,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cluster_errors_name_the_field(path, value, field, words):
    with pytest.raises(InvalidSpec) as err:
        build_cluster(setin(base_cluster(), path, value))
    assert err.value.field == field
    assert words in err.value.reason


RUNNING_CASES = [
    ("unknown node", running(node="h-9"), "running[0].placement[0].node", "unknown node"),
    ("unknown device", running(gpus=(0, 8)), "running[0].placement[0].gpus", "has no GPU 8"),
    ("gpu count", running(gpus=(0,)), "running[0].placement[0].gpus", "asks for 2"),
    ("gpu twice", running(gpus=(1, 1)), "running[0].placement[0].gpus", "listed twice"),
    ("replicas", running(replicas=2), "running[0].placement", "one entry per replica"),
    ("wrong model", running(node="l4", resources={"gpu": 1, "gpu_model": "*H100*"}, gpus=(0,)),
     "running[0].placement[0].gpus", "does not match"),
    ("share on whole", running(placement=[{"node": "h-0", "gpus": [0, 1], "share": 0.5}]),
     "running[0].placement[0].share", "fractional"),
    ("share too big", running(resources={"gpu": 0.5}, placement=[
        {"node": "h-0", "gpus": [0], "share": 1.5}]), "running[0].placement[0].share", "between 0 and 1"),
    ("unknown queue", running(queue="nope"), "running[0].queue", "unknown queue"),
    ("unknown project", running(project="nope"), "running[0].project", "unknown project"),
    ("no placement", running(placement=[]), "running[0].placement", "at least 1"),
]


@pytest.mark.parametrize("job,field,words", [c[1:] for c in RUNNING_CASES],
                         ids=[c[0] for c in RUNNING_CASES])
def test_running_errors_name_the_field(job, field, words):
    with pytest.raises(InvalidSpec) as err:
        build_cluster(with_running(job))
    assert err.value.field == field
    assert words in err.value.reason


@pytest.mark.parametrize("first,second,field,words", [
    # two whole-GPU jobs on GPU 1 of h-0
    (running("a", gpus=(0, 1)), running("b", gpus=(1, 2)), "running[1].placement[0].gpus",
     "GPU 1 of node h-0 is over-booked"),
    # 0.75 + 0.5 of one L4
    (running("a", "l4", (0,), queue="product", resources={"gpu": 0.75}),
     running("b", "l4", (0,), queue="product", resources={"gpu": 0.5}),
     "running[1].placement[0].gpus", "hold 1.25 of it"),
    # 10 + 8 CPUs on a 16-CPU node
    (running("a", "l4", (0,), queue="product", resources={"gpu": 1, "cpu": 10}),
     running("b", "l4", (1,), queue="product", resources={"gpu": 1, "cpu": 8}),
     "running[1].placement[0].node", "node l4 is over-booked"),
    (running("a"), running("a", gpus=(4, 5)), "running[1].name", "already defined"),
], ids=["device twice", "fractions above one GPU", "node cpu", "duplicate name"])
def test_overbooking_and_duplicates(first, second, field, words):
    with pytest.raises(InvalidSpec) as err:
        build_cluster(with_running(first, second))
    assert err.value.field == field
    assert words in err.value.reason


def test_running_on_gpus_outside_every_queue_flavour():
    data = with_running(running("r", "l4", (0,), resources={"gpu": 1}))  # research has no L4
    with pytest.raises(InvalidSpec) as err:
        build_cluster(data)
    assert err.value.field == "running[0].placement"
    assert "no flavour of queue research" in err.value.reason


def test_fractions_of_one_device_up_to_one_are_fine():
    jobs = [running(f"n{i}", "l4", (0,), queue="product", resources={"gpu": 0.25, "cpu": 1,
                                                                       "memory": "4Gi"})
            for i in range(4)]
    assert len(build_cluster(with_running(*jobs)).snapshot.jobs) == 4


def test_unused_job_keys_are_still_validated_for_running_jobs():
    bad = running(checkpoint={"signal": "SIGNOPE"})
    with pytest.raises(InvalidSpec) as err:
        build_cluster(with_running(bad))
    assert err.value.field == "running[0].checkpoint.signal"


