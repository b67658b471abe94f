"""Placement by time to first batch (``rota.scheduler.data``): a job that reads a dataset goes
to the node that caches it, waits for a busy warm node no longer than a cold copy would take,
says why while it waits, and jobs without datasets are placed exactly as before.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from builders import bound, cluster, codes, decide, job, node, waiting
from rota.core import Snapshot
from rota.core.datasets import Dataset
from rota.core.jobwords import why_lines
from rota.core.wording import reason_json, sentence
from rota.scheduler import build_policy, run_cycle

from .test_properties import random_job, random_nodes, random_queues

GB = 10 ** 9
IMAGENET = Dataset("imagenet", "p", "/shared/imagenet", "1", 52 * GB)
COCO = Dataset("coco", "p", "/shared/coco", "2", 20 * GB)


def _with_data(snap: Snapshot, caches: dict[str, dict[str, int]]) -> Snapshot:
    """``snap`` whose nodes cache ``caches`` (node -> key -> bytes) and that knows the
    datasets above."""
    nodes = tuple(replace(n, cache=caches.get(n.name, {})) for n in snap.nodes)
    return replace(snap, nodes=nodes, datasets={"imagenet": IMAGENET, "coco": COCO})


def _nodes_of(d) -> dict[str, list[str]]:
    return {b.job: [r.node for r in b.placement.replicas] for b in d.binds}


@pytest.mark.parametrize("placement", ["binpack", "spread", "topology"])
def test_a_job_goes_to_the_node_that_caches_its_dataset(placement):
    # binpack would take n0 (listed first, equally full), spread too: n2 holds imagenet
    snap = cluster().nodes(*[node(f"n{k}").gpus(8) for k in range(3)]).jobs(
        job("train").gpus(2).datasets(("imagenet",))).build()
    snap = _with_data(snap, {"n2": {"imagenet@1": 52 * GB}})
    assert _nodes_of(decide(snap, {"preset": "fifo", "placement": placement})) == {
        "train": ["n2"]}


def test_a_partly_cached_node_beats_a_cold_one_and_a_whole_copy_beats_both():
    # n0: nothing (52 s at 1 GB/s); n1: 40 of 52 GB (12 s); n2 holds coco only (52 s)
    snap = cluster().nodes(*[node(f"n{k}").gpus(8) for k in range(3)]).jobs(
        job("a").gpus(8).datasets(("imagenet",))).build()
    snap = _with_data(snap, {"n1": {"imagenet@1": 40 * GB}, "n2": {"coco@2": 20 * GB}})
    assert _nodes_of(decide(snap, "fifo")) == {"a": ["n1"]}


def test_another_version_in_the_cache_is_not_the_dataset():
    snap = cluster().nodes(node("n0").gpus(8), node("n1").gpus(8)).jobs(
        job("a").gpus(1).datasets(("imagenet",))).build()
    snap = _with_data(snap, {"n1": {"imagenet@0": 52 * GB}})  # an old version
    policy = build_policy({"preset": "fifo", "data": {"delay": False}})
    assert _nodes_of(run_cycle(snap, policy, 0.0)) == {"a": ["n0"]}


def _busy_warm_node(now_waited: float) -> tuple[Snapshot, float]:
    # n-warm caches imagenet but its 8 GPUs are taken; n-cold is free: a cold start copies
    # 52 GB at 1 GB/s = 52 s
    snap = cluster().nodes(node("n-warm").gpus(8), node("n-cold").gpus(8)).jobs(
        job("busy").gpus(8).running_on(("n-warm", list(range(8)))),
        job("train").gpus(4).datasets(("imagenet",)).submitted(100.0)).build()
    return _with_data(snap, {"n-warm": {"imagenet@1": 52 * GB}}), 100.0 + now_waited


def test_a_job_waits_for_a_busy_warm_node_while_a_cold_start_would_cost_more():
    snap, now = _busy_warm_node(12.0)
    d = decide(snap, "fifo", now)
    assert bound(d) == {}
    assert codes(d, "train") == ["data-locality"]
    reason = waiting(d)["train"].reasons[0]
    # a cold copy: 52 s; it has waited 12 s, so it may wait 40 s more
    assert (reason.requested, reason.free, reason.detail) == (52.0, 40.0, "n-warm:imagenet")
    assert sentence(reason) == ("Waits up to 40s for node n-warm, which holds its dataset "
                                "imagenet; starting cold elsewhere would cost 52s to copy.")
    # as ``rota show`` tells it, from the reason stored in the job's view
    assert why_lines({"wait_reasons": [reason_json(reason)]}) == [sentence(reason)]


def test_a_job_takes_a_cold_node_once_it_has_waited_what_a_cold_start_costs():
    snap, now = _busy_warm_node(52.0)
    assert _nodes_of(decide(snap, "fifo", now)) == {"train": ["n-cold"]}


def test_without_the_delay_bound_or_with_data_placement_off_it_starts_cold_at_once():
    snap, now = _busy_warm_node(0.0)
    for data in ({"delay": False}, "none"):
        policy = build_policy({"preset": "fifo", "data": data})
        assert _nodes_of(run_cycle(snap, policy, now)) == {"train": ["n-cold"]}


def test_a_job_waiting_for_data_preempts_nothing():
    # the default preset preempts; a higher-priority job waiting for the warm node does not
    snap, now = _busy_warm_node(0.0)
    jobs = tuple(replace(j, priority=10) if j.id == "train" else j for j in snap.jobs)
    d = decide(replace(snap, jobs=jobs), "default", now)
    assert d.preemptions == [] and codes(d, "train") == ["data-locality"]


def test_a_warm_node_the_job_may_not_use_is_not_waited_for():
    # n-warm is in another resource group, then cordoned: the job starts cold at once
    snap, now = _busy_warm_node(0.0)
    for change in ({"resource_group": "other"}, {"schedulable": False}):
        nodes = tuple(replace(n, **change) if n.name == "n-warm" else n for n in snap.nodes)
        queues = {"q": replace(snap.queues["q"], resource_groups=("default",))}
        d = decide(replace(snap, nodes=nodes, queues=queues), "fifo", now)
        assert _nodes_of(d) == {"train": ["n-cold"]}


def test_a_node_that_copies_faster_is_cold_for_less_time():
    # n-cold copies at 13 GB/s: 4 s for 52 GB, so after 4 s of waiting it starts there
    snap, now = _busy_warm_node(4.0)
    nodes = tuple(replace(n, data_bandwidth=13 * GB) if n.name == "n-cold" else n
                  for n in snap.nodes)
    assert _nodes_of(decide(replace(snap, nodes=nodes), "fifo", now)) == {"train": ["n-cold"]}


def test_a_gang_prefers_the_nodes_that_share_its_cache():
    snap = cluster().nodes(*[node(f"n{k}").gpus(8) for k in range(4)]).jobs(
        job("gang").gpus(8).replicas(2).datasets(("coco",))).build()
    snap = _with_data(snap, {"n1": {"coco@2": 20 * GB}, "n3": {"coco@2": 20 * GB}})
    assert _nodes_of(decide(snap, "fifo")) == {"gang": ["n1", "n3"]}


def test_soft_affinity_takes_any_copy_and_required_affinity_waits_for_one():
    snap, now = _busy_warm_node(1000.0)  # waited far beyond a cold start
    soft = build_policy({"preset": "fifo", "data": {"mode": "soft"}})
    assert _nodes_of(run_cycle(snap, soft, now)) == {"train": ["n-cold"]}
    required = build_policy({"preset": "fifo", "data": {"mode": "required"}})
    d = run_cycle(snap, required, now)
    assert bound(d) == {} and codes(d, "train") == ["data-locality"]
    assert sentence(waiting(d)["train"].reasons[0]).startswith(
        "Waits for node n-warm, which holds its dataset imagenet")


def test_a_bad_data_setting_names_the_field():
    with pytest.raises(Exception, match="policy.data.bandwidth"):
        build_policy({"data": {"bandwidth": 0}})
    with pytest.raises(Exception, match="policy.data"):
        build_policy({"data": "fast"})


@pytest.mark.parametrize("seed", range(6))
def test_decisions_for_jobs_without_datasets_are_the_same_with_data_placement_on(seed):
    rng = random.Random(seed)
    queues = random_queues(rng)
    nodes = tuple(replace(n, cache={"imagenet@1": GB}) for n in random_nodes(rng))
    jobs = tuple(random_job(rng, f"j{k}", list(queues), float(k)) for k in range(25))
    snap = Snapshot(nodes, queues, jobs, datasets={"imagenet": IMAGENET})
    for preset in ("default", "fifo", "spread"):
        on = run_cycle(snap, build_policy(preset), 0.0)
        off = run_cycle(snap, build_policy({"preset": preset, "data": "none"}), 0.0)
        assert on == off
