"""Several backends' reports of the same machines made one inventory
(``rota.backends.engines.merge``): a machine two members report is one node whose GPUs any
member's foreign work holds, labelled with the engines that can launch there."""

from __future__ import annotations

import pytest

from builders import job, node
from rota.backends.engines import ENGINE_LABEL, asked_engines, merge
from rota.core.nodes import CONTAINERS, GPU_SHARING, SIGNALS

SLURM_LABEL, KUBE_LABEL = f"{ENGINE_LABEL}slurm", f"{ENGINE_LABEL}kubernetes"


def test_a_machine_both_report_is_one_node_whose_gpus_either_ones_foreign_work_holds():
    slurm = node("node1").gpus(4, "H100-80GB").features(GPU_SHARING, SIGNALS) \
        .held_by("slurm job 7 (omar)", gpus=[0, 1]).build()
    kube = node("node1").gpus(4, "H100-80GB").features(CONTAINERS) \
        .held_by("pod ml/infer-0 (default-scheduler)", gpus=[3]).build()
    merged = merge([("slurm", [slurm]), ("kubernetes", [kube])])
    (one,) = merged.nodes
    assert one.name == "node1" and one.devices == slurm.devices
    # every GPU held from either side is held for both: 0 and 1 by sbatch, 3 by the Pod
    assert [(f.holder, [s.index for s in f.devices]) for f in one.foreign] == [
        ("slurm job 7 (omar)", [0, 1]), ("pod ml/infer-0 (default-scheduler)", [3])]
    assert (one.labels[SLURM_LABEL], one.labels[KUBE_LABEL]) == ("true", "true")
    assert one.features == {GPU_SHARING, SIGNALS, CONTAINERS}
    assert merged.reach == {"node1": {"slurm": slurm.features, "kubernetes": kube.features}}


def test_nodes_of_one_member_only_keep_their_report_and_get_its_engine_label():
    merged = merge([("slurm", [node("node3").gpus(4).build()]),
                    ("kubernetes", [node("gpu-9").gpus(8).label("zone", "b").build()])])
    assert [(n.name, len(n.devices), dict(n.labels)) for n in merged.nodes] == [
        ("node3", 4, {SLURM_LABEL: "true"}),
        ("gpu-9", 8, {"zone": "b", KUBE_LABEL: "true"})]
    assert {name: set(r) for name, r in merged.reach.items()} == {
        "node3": {"slurm"}, "gpu-9": {"kubernetes"}}


def test_a_member_with_a_problem_there_does_not_reach_the_node():
    drained = node("node1").gpus(4).problem("drained: maintenance").build()
    ready = node("node1").gpus(4).features(CONTAINERS).build()
    merged = merge([("slurm", [drained]), ("kubernetes", [ready])])
    (one,) = merged.nodes
    assert one.problem == "" and one.features == {CONTAINERS}
    assert SLURM_LABEL not in one.labels and one.labels[KUBE_LABEL] == "true"
    assert set(merged.reach["node1"]) == {"kubernetes"}


def test_a_node_no_member_reaches_carries_every_members_problem():
    merged = merge([("slurm", [node("node1").gpus(4).problem("drained").build()]),
                    ("kubernetes", [node("node1").gpus(4).problem("cordoned").build()])])
    (one,) = merged.nodes
    assert one.problem == "slurm: drained; kubernetes: cordoned"
    assert merged.reach["node1"] == {}


def test_a_gpu_either_member_finds_unhealthy_is_unhealthy():
    merged = merge([("slurm", [node("node1").gpus(4).build()]),
                    ("kubernetes", [node("node1").gpus(4).unhealthy(2).build()])])
    assert [d.healthy for d in merged.nodes[0].devices] == [True, True, False, True]


def test_foreign_work_on_devices_the_first_report_lacks_keeps_only_the_devices_it_has():
    merged = merge([("slurm", [node("node1").gpus(2).build()]),
                    ("kubernetes", [node("node1").gpus(4).held_by("pod x", gpus=[1, 3])
                                    .build()])])
    assert [[s.index for s in f.devices] for f in merged.nodes[0].foreign] == [[1]]


@pytest.mark.parametrize("selector, engines", [
    ((), set()),
    (((f"{ENGINE_LABEL}kubernetes", "true"),), {"kubernetes"}),
    (((f"{ENGINE_LABEL}slurm", "true"), ("zone", "b")), {"slurm"}),
    (((f"{ENGINE_LABEL}slurm", "false"),), set()),
], ids=["none", "kubernetes", "slurm-beside-another-label", "not-true"])
def test_a_selector_asks_for_engines_by_their_label(selector, engines):
    assert asked_engines(selector) == engines


# -- holds: what a replica holds on another engine (rota.backends.holds, kube.holds) ---------

def test_a_hold_covers_the_whole_gpus_of_the_replicas_on_the_nodes_the_holder_reports():
    from rota.backends.holds import ToHold, to_hold
    from rota.core import MILLI, DeviceShare, Placement, ReplicaPlacement
    placement = Placement((
        ReplicaPlacement("node1", (DeviceShare(0, MILLI, 80_000), DeviceShare(2, MILLI, 80_000))),
        ReplicaPlacement("node2", (DeviceShare(1, MILLI, 80_000),)),
        ReplicaPlacement("node1", (DeviceShare(3, 500, 40_000),)),  # a fraction: not held
    ))
    assert to_hold(placement, frozenset({"node1"})) == [ToHold(0, "node1", (0, 2))]
    assert to_hold(placement, frozenset()) == []


def test_an_attempt_is_launched_on_the_gpus_the_holding_engine_chose_for_each_rank():
    from rota.backends.holds import given
    from rota.core import MILLI, DeviceShare, Placement, ReplicaPlacement
    placement = Placement((
        ReplicaPlacement("node1", (DeviceShare(0, MILLI, 80_000), DeviceShare(1, MILLI, 80_000))),
        ReplicaPlacement("node2", (DeviceShare(0, MILLI, 80_000),)),
    ))
    # Slurm gave rank 0 GPUs 2 and 3; rank 1 is on a node it does not hold
    assert given(placement, {0: (2, 3)}) == Placement((
        ReplicaPlacement("node1", (DeviceShare(2, MILLI, 80_000), DeviceShare(3, MILLI, 80_000))),
        ReplicaPlacement("node2", (DeviceShare(0, MILLI, 80_000),)),
    ))
    assert given(placement, {0: (5,)}) == placement  # not as many as placed: left as placed
