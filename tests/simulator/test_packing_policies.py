"""The six packing policies: node scores, device choice, tie-breaks and FGD's fragment measure,
on hand-made nodes with the arithmetic worked out next to each case."""

from __future__ import annotations

import math
import random

import pytest

from builders import node, shape, state_with
from rota.core import MILLI, InvalidSpec
from rota.scheduler import build_policy
from rota.scheduler.placement import find_replica, place_gang
from rota.scheduler.plugins import fragment
from rota.scheduler.plugins.fragment import Fragmenter, TaskClass, class_fragment
from rota.scheduler.plugins.registry import create





def plugin(name, **args):
    return create("placement", name, args)


# -- FGD's fragment measure ------------------------------------------------------------------

DEVS = (("G2", 0), ("G2", 200), ("G2", 500), ("G2", 1000))  # idle = 1700


@pytest.mark.parametrize("cls, cpu, expected", [
    # share 300: devices with >= 300 free (500, 1000) fit; leftovers below 300: 0 + 200
    (TaskClass(2000, 300, 1), 10_000, 200),
    # two whole GPUs: only one device is wholly free -> the class does not fit: all idle
    (TaskClass(4000, MILLI, 2), 10_000, 1700),
    # one whole GPU fits; the partly used devices (200, 500) are fragments for it
    (TaskClass(4000, MILLI, 1), 10_000, 700),
    # CPU-only: it can never use idle GPU
    (TaskClass(1000, 0, 0), 10_000, 1700),
    # share 300 but 20 cores and the node has 10: does not fit: all idle
    (TaskClass(20_000, 300, 1), 10_000, 1700),
    # a class for another model: all idle
    (TaskClass(1000, 100, 1, ("V100M32",)), 10_000, 1700),
], ids=["share-fits", "two-whole-do-not-fit", "one-whole", "cpu-only", "too-little-cpu",
        "other-model"])
def test_class_fragment(cls, cpu, expected):
    assert class_fragment(cpu, DEVS, cls) == expected


def test_node_fragment_is_the_weighted_sum_over_classes():
    # weights 2:1:1 -> p = 0.5, 0.25, 0.25; F = 0.5*200 + 0.25*1700 + 0.25*700 = 100+425+175 = 700
    frag = Fragmenter([TaskClass(2000, 300, 1, (), 2), TaskClass(4000, MILLI, 2, (), 1),
                       TaskClass(4000, MILLI, 1, (), 1)])
    assert frag.node(10_000, DEVS) == pytest.approx(700)


def test_the_memo_of_node_states_is_bounded_and_answers_stay_the_same(monkeypatch):
    monkeypatch.setattr(fragment, "MEMO_LIMIT", 4)
    frag = Fragmenter([TaskClass(2000, 300, 1, (), 2), TaskClass(4000, MILLI, 1, (), 1)])
    states = [(cpu, (("G", free), ("G", 1000))) for cpu in (1000, 3000) for free in (0, 200, 500)]
    first = [frag.node(cpu, devs) for cpu, devs in states]
    assert len(frag._cache) <= 4
    assert [frag.node(cpu, devs) for cpu, devs in states] == first


WORKLOAD = [  # p = 0.5 share 300, 0.5 one whole GPU
    {"cpu": 2000, "gpu_milli": 300, "num_gpu": 1, "weight": 1},
    {"cpu": 4000, "gpu_milli": 1000, "num_gpu": 1, "weight": 1},
]


def test_fgd_takes_the_node_and_device_with_the_smallest_fragmentation_increase():
    # n1 devices free (1000, 500), n2 (1000, 1000); task: share 300, 1 core.
    # F(n1) = 0.5*0 [both fit 300] + 0.5*500 [one whole fits; 500 is a fragment] = 250
    #   on dev0 -> (700, 500): 0.5*0 + 0.5*1200 [no whole GPU left: all idle]   = 600 (+350)
    #   on dev1 -> (1000, 200): 0.5*200 + 0.5*200                              = 200 (-50)
    # F(n2) = 0;  on one device -> (700, 1000): 0.5*0 + 0.5*700                = 350 (+350)
    # best: n1 dev1, delta -50; score floor(100 / (1 + e^-0.05)) = floor(51.25) = 51
    st = state_with(node("n1").gpus(2, "G2").cpu(32), node("n2").gpus(2, "G2").cpu(32),
                    used=[(0, 0, {1: 500})])
    fgd = plugin("fgd", workload=WORKLOAD)
    slot, positions = find_replica(st, shape(1000, 1, 300), fgd, False)
    assert (slot.name, positions) == ("n1", [1])
    assert fgd.score(slot, shape(1000, 1, 300), positions) == 51
    assert math.floor(100 / (1 + math.exp(-50 / 1000))) == 51


def test_fgd_prefers_filling_a_fragment_over_breaking_a_whole_gpu_even_against_best_fit():
    # n1 free (1000, 400): a share of 300 on dev1 leaves 100 (F: 0.5*100 + 0.5*100 = 100,
    # before 0.5*0+0.5*400 = 200 -> -100); on dev0 -> (700, 400): 0.5*0 + 0.5*1100 = 550 (+350)
    st = state_with(node("n1").gpus(2, "G2").cpu(32), used=[(0, 0, {1: 600})])
    slot, positions = find_replica(st, shape(1000, 1, 300), plugin("fgd", workload=WORKLOAD), False)
    assert positions == [1]


# -- the baselines' scores -------------------------------------------------------------------

def scored(name, st, i, req, **args):
    p = plugin(name, **args)
    p.select(st, req, False)  # follow the state (gpuclustering reads the kinds hosted)
    slot = st.slots[i]
    return p.score(slot, req, [])


FOUR = node("n").gpus(4, "G2").cpu(64)  # 64 cores, 4 GPUs


@pytest.mark.parametrize("name, used, req, expected", [
    # dotprod: free (64 cores, 4 GPUs) . task (8 cores, 1 GPU), scaled by 128 cores / 8 GPUs:
    # 0.5*0.0625 + 0.5*0.125 = 0.09375 -> int(100 * (1 - 0.09375/2)) = int(95.31) = 95
    ("dotprod", (), shape(8000, 1), 95),
    # bestfit: leftover 0.5*(64-8)/128 + 0.5*(4000-1000)/8000 = 0.21875+0.1875 = 0.40625 -> 59
    ("bestfit", (), shape(8000, 1), 59),
    # gpupacking, idle node: max(33 - 4, 4) = 29
    ("gpupacking", (), shape(1000, 1, 300), 29),
    # gpupacking, share onto a partly used device: free (1000, 400, 1000, 1000), 400 fits 300:
    # 100 - (400*100/1000)/10 = 100 - 4 = 96
    ("gpupacking", ({1: 600},), shape(1000, 1, 300), 96),
    # gpupacking, whole GPU on a partly used node: 50 - 1 = 49
    ("gpupacking", ({1: 600},), shape(1000, 1), 49),
    # gpupacking, CPU-only: 0
    ("gpupacking", ({1: 600},), shape(1000), 0),
    # gpuclustering, node hosting only shares, free 3400 of 8 GPUs: 25*(8000-3400)//8000 = 14
    # share task: same kind only -> 14 + 75 = 89
    ("gpuclustering", ({1: 600},), shape(1000, 1, 300), 89),
    # ... a 1-GPU task: only other kinds -> 14
    ("gpuclustering", ({1: 600},), shape(1000, 1), 14),
    # ... idle node: 25*(8000-4000)//8000 + 25 = 12 + 25 = 37
    ("gpuclustering", (), shape(1000, 1), 37),
    # ... hosting shares and a whole GPU, share task: mixed -> 25*(8000-2400)//8000 + 50 = 67
    ("gpuclustering", ({1: 600}, {2: 1000}), shape(1000, 1, 300), 67),
    # ... CPU-only: 0
    ("gpuclustering", ({1: 600},), shape(1000), 0),
], ids=["dotprod", "bestfit", "packing-idle", "packing-share", "packing-whole", "packing-cpu",
        "clustering-same", "clustering-other", "clustering-idle", "clustering-mixed",
        "clustering-cpu"])
def test_baseline_scores(name, used, req, expected):
    st = state_with(FOUR, used=[(0, 0, u) for u in used])
    assert scored(name, st, 0, req) == expected


def test_gpupacking_idle_score_is_at_least_the_gpu_count():
    # an idle 8-GPU node: max(33 - 8, 8) = 25; an idle 2-GPU node: max(33 - 2, 2) = 31
    st = state_with(node("a").gpus(8, "G2"), node("b").gpus(2, "G2"))
    assert [scored("gpupacking", st, i, shape(1000, 1)) for i in (0, 1)] == [25, 31]


@pytest.mark.parametrize("name", ["dotprod", "bestfit", "gpupacking", "gpuclustering"])
def test_a_fraction_goes_on_the_best_fit_device(name):
    # free (1000, 400, 700, 1000): best fit for 300 is the device with 400 free
    st = state_with(FOUR, used=[(0, 0, {1: 600, 2: 300})])
    _, positions = find_replica(st, shape(1000, 1, 300), plugin(name), False)
    assert positions == [1]


def test_whole_gpus_take_the_lowest_indexed_free_devices():
    st = state_with(FOUR, used=[(0, 0, {0: 300})])
    _, positions = find_replica(st, shape(1000, 2), plugin("fgd", workload=WORKLOAD), False)
    assert positions == [1, 2]


def test_random_picks_a_device_that_fits_at_random():
    st = state_with(FOUR, used=[(0, 0, {0: 900, 3: 100})])  # free 100, 1000, 1000, 900
    seen = {tuple(find_replica(st, shape(1000, 1, 500), plugin("random", seed=s), False)[1])
            for s in range(40)}
    assert seen == {(1,), (2,), (3,)}


# -- the node order and feasibility ----------------------------------------------------------

@pytest.mark.parametrize("name", ["random", "dotprod", "gpuclustering", "gpupacking", "bestfit"])
def test_ties_go_to_the_first_node_of_the_seeded_order(name):
    nodes = [node(f"n{i}").gpus(2, "G2") for i in range(6)]
    firsts = set()
    for seed in range(12):
        st = state_with(*nodes)
        slot, _ = find_replica(st, shape(1000, 1), plugin(name, seed=seed), False)
        order = list(range(6))
        random.Random(seed).shuffle(order)
        if name != "random":
            assert slot.i == order[0]
        firsts.add(slot.i)
    assert len(firsts) > 1  # the order really depends on the seed


def test_memory_cpu_and_model_are_hard_constraints():
    st = state_with(node("small").gpus(2, "T4").cpu(4).memory(8),
                    node("big").gpus(2, "T4").cpu(64).memory(512),
                    node("v100").gpus(2, "V100M32").cpu(64).memory(512))
    bf = plugin("bestfit")
    # 8 cores: only big or v100 (bestfit prefers neither by model); 100 GiB: not small
    assert find_replica(st, shape(8000, 1, mem=100 * 1024, models=("T4",)), bf, False)[0].name == "big"
    assert find_replica(st, shape(1000, 1, models=("V100M32",)), bf, False)[0].name == "v100"
    assert find_replica(st, shape(1000, 4), bf, False) is None
    assert find_replica(st, shape(100_000, 0), bf, False) is None


def test_the_plugin_follows_the_state_through_takes_and_undos():
    st = state_with(node("a").gpus(1, "G2"), node("b").gpus(1, "G2"))
    bf = plugin("bestfit", seed=0)
    mark = st.mark()
    placed = [place_gang(st, shape(1000, 1), 1, bf)[0].replicas[0].node for _ in range(2)]
    assert sorted(placed) == ["a", "b"]
    assert place_gang(st, shape(1000, 1), 1, bf)[0] is None  # both full
    st.undo(mark)  # an undo is seen: everything is free again
    assert place_gang(st, shape(1000, 1), 1, bf)[0] is not None


def test_packing_plugins_run_inside_the_scheduling_cycle():
    from builders import bound, cluster, decide, job
    snap = cluster().nodes(node("n1").gpus(2), node("n2").gpus(2)).jobs(
        job("a").gpus(0.5), job("b").gpus(0.25)).build()
    binds = bound(decide(snap, {"preset": "besteffort", "placement": {"name": "gpupacking"}}))
    assert binds["a"].placement.replicas[0].node == binds["b"].placement.replicas[0].node


@pytest.mark.parametrize("args, field", [
    ({"seed": "x"}, "placement.args.seed"),
    ({"workload": []}, "placement.args.workload"),
    ({"workload": [{"cpu": -1, "gpu_milli": 0, "num_gpu": 0, "weight": 1}]},
     "placement.args.workload.0.cpu"),
    ({"workload": [{"cpu": 1, "gpu_milli": 0, "num_gpu": 0, "weight": 0}]},
     "placement.args.workload.0.weight"),
    ({"workload": WORKLOAD, "extra": 1}, "placement.args.extra"),
])
def test_bad_plugin_args_name_the_field(args, field):
    with pytest.raises(InvalidSpec) as err:
        create("placement", "fgd", args)
    assert err.value.field == field


def test_a_policy_can_name_a_packing_plugin():
    policy = build_policy({"preset": "besteffort", "placement": {"name": "bestfit", "args": {"seed": 3}}})
    assert policy.placement.name == "bestfit" and policy.placement.seed == 3
