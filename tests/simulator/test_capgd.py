"""Capacity gradient descent (``capgd``): its online mix, the stranding and scarcity terms, and
its choices on hand-made nodes, with the arithmetic worked out next to each case. The mix is
the caller's: each request is observed into it before it is placed (``arrive``), as the
packing experiment does."""

from __future__ import annotations

import math

import pytest

from builders import node, shape, state_with
from rota.core import MILLI, InvalidSpec
from rota.scheduler import build_policy
from rota.scheduler.placement import find_replica, place_gang
from rota.scheduler.plugins.capacity import (
    ArrivalMix, class_of, fits_kind, scarcity, shape_scarcity, stranded,
)
from rota.scheduler.plugins.fragment import TaskClass
from rota.scheduler.plugins.registry import create
from rota.simulator.pack import run


def capgd_following(**args):
    """A capgd scorer and the mix it follows (empty)."""
    plugin = create("placement", "capgd", {"seed": 0, **args})
    mix = plugin.new_mix()
    return plugin.following(mix), mix


def arrive(mix, *shapes):
    for s in shapes:
        mix.observe(class_of(s))
    return shapes[-1]


def score_of(cost):
    return math.floor(100 / (1 + math.exp(cost / MILLI)))


# -- the online mix ----------------------------------------------------------------------------

A, B, C = TaskClass(1000, 0, 0), TaskClass(3000, 810, 1), TaskClass(11_000, MILLI, 1, ("T4",))


def test_later_requests_weigh_more_by_the_half_life():
    # half-life 1 request: each request weighs twice the one before: A 1, B 2, C 4 (of 7)
    mix = ArrivalMix(half_life=1, coverage=1.0)
    for m in (A, B, C):
        mix.observe(m)
    got = {(m.cpu, m.milli, m.count, m.models): m.weight for m in mix.estimate}
    assert got == pytest.approx({(11_000, MILLI, 1, ("T4",)): 4 / 7, (3000, 810, 1, ()): 2 / 7,
                                 (1000, 0, 0, ()): 1 / 7})


@pytest.mark.parametrize("coverage, kept", [
    # counts B 3, A 2, C 1 (no decay to speak of): B alone covers 3/6 >= 0.45
    (0.45, {(3000, 810): 1.0}),
    # B + A cover 5/6 >= 0.8: renormalised 3/5, 2/5
    (0.8, {(3000, 810): 0.6, (1000, 0): 0.4}),
    # everything
    (1.0, {(3000, 810): 0.5, (1000, 0): 2 / 6, (11_000, MILLI): 1 / 6}),
], ids=["half", "most", "all"])
def test_the_mix_keeps_the_most_popular_classes_up_to_the_coverage(coverage, kept):
    mix = ArrivalMix(half_life=1e12, coverage=coverage)
    for m in (B, A, B, C, A, B):
        mix.observe(m)
    got = {(m.cpu, m.milli): m.weight for m in mix.estimate}
    assert got == pytest.approx(kept)
    assert sum(got.values()) == pytest.approx(1.0)


def test_the_mix_is_refreshed_often_at_first_then_every_quarter_more_up_to_every():
    # due when seen - last >= min(every, max(1, last // 4)): 1..8 one by one, then 8+2, 10+2,
    # 12+3, 15+3, 18+4, 22+5, 27+6 (= 33), 33+8 -> capped at every = 4 from 33 on: 37, 41
    mix = ArrivalMix(every=4)
    refreshed, estimate = [], mix.estimate
    for i in range(1, 42):
        mix.observe(A)
        if mix.estimate is not estimate:
            refreshed.append(i)
            estimate = mix.estimate
    assert refreshed == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 18, 22, 26, 30, 34, 38]
    assert estimate == (TaskClass(1000, 0, 0, (), 1.0),) and not mix.due()


def test_a_request_class_is_its_cpu_share_count_and_models():
    assert class_of(shape(3000, 1, 810)) == TaskClass(3000, 810, 1, ())
    assert class_of(shape(11_000, 2, MILLI, ("T4",))) == TaskClass(11_000, MILLI, 2, ("T4",))
    assert class_of(shape(8000)) == TaskClass(8000, 0, 0, ())  # CPU-only: share 0, count 0


# -- the two terms ---------------------------------------------------------------------------

@pytest.mark.parametrize("idle, cpu, node_cpu, gpus, expected", [
    (8000, 96_000, 96_000, 8, 0.0),  # an empty node strands nothing
    # 8 GPUs, 96 cores, 32 cores taken by a CPU-only task: 64 cores cover 64*8/96 = 5.33 GPUs
    (8000, 64_000, 96_000, 8, 8000 - 64_000 * 8000 / 96_000),  # = 2666.7
    # 2 GPUs, 104 cores, the same 32 cores taken: 72 cores cover 1.38 GPUs -> 615.4 stranded
    (2000, 72_000, 104_000, 2, 2000 - 72_000 * 2000 / 104_000),
    (1000, 20_000, 96_000, 8, 0.0),  # more CPU than the idle GPUs need: nothing stranded
    (0, 0, 96_000, 8, 0.0),  # no idle GPU
    (0, 0, 96_000, 0, 0.0),  # a CPU-only node
], ids=["empty", "cpu-task-on-8-gpu-node", "cpu-task-on-cpu-rich-node", "cpu-to-spare",
        "full", "no-gpu"])
def test_stranded(idle, cpu, node_cpu, gpus, expected):
    assert stranded(idle, cpu, node_cpu, gpus) == pytest.approx(expected)


CLUSTER = {"T4": 2, "G2": 8}  # 10 GPUs: T4 is 0.2 of them


@pytest.mark.parametrize("classes, expected", [
    ([TaskClass(4000, MILLI, 1, (), 1.0)], {"T4": 0.0, "G2": 0.0}),  # nobody constrained
    # demand: flexible 0.9*1000, T4-only 0.1*1000 -> T4-only is 0.1 of the demand on 0.2 of
    # the GPUs: 0.1 / 0.2 = 0.5
    ([TaskClass(4000, MILLI, 1, (), 0.9), TaskClass(4000, MILLI, 1, ("T4",), 0.1)],
     {"T4": 0.5, "G2": 0.0}),
    # T4-only share 500 at 0.5 -> 250 of 750 demand = 1/3 on 0.2: 1.67, capped at 1
    ([TaskClass(4000, MILLI, 1, (), 0.5), TaskClass(4000, 500, 1, ("T4",), 0.5)],
     {"T4": 1.0, "G2": 0.0}),
    # a class allowed on both models puts 0.1 / 1.0 = 0.1 on each
    ([TaskClass(4000, MILLI, 1, (), 0.9), TaskClass(4000, MILLI, 1, ("T4", "G2"), 0.1)],
     {"T4": 0.1, "G2": 0.1}),
    ([TaskClass(4000, 0, 0, (), 1.0)], {"T4": 0.0, "G2": 0.0}),  # no GPU demand at all
], ids=["unconstrained", "half", "capped", "both-models", "cpu-only"])
def test_scarcity(classes, expected):
    assert scarcity(classes, CLUSTER) == pytest.approx(expected)


G3, G2 = (128_000, ("G3",) * 8), (96_000, ("G2",) * 8)  # node kinds: total CPU, device models
BIG = TaskClass(120_000, MILLI, 8, (), 0.5)  # 8 GPUs, 120 cores: only G3 nodes hold one
SMALL = TaskClass(4000, MILLI, 1, (), 0.5)


@pytest.mark.parametrize("m, kind, fits", [
    (BIG, G3, True), (BIG, G2, False),                   # 120 cores > 96
    (SMALL, G2, True),
    (TaskClass(4000, MILLI, 2, ("T4",)), G2, False),     # no T4 device on a G2 node
    (TaskClass(4000, 500, 1, ("G*",)), G3, True),
])
def test_fits_kind(m, kind, fits):
    assert fits_kind(m, kind) is fits


@pytest.mark.parametrize("classes, kinds, expected", [
    # everybody fits every kind: no reserve
    ([SMALL], {G3: 1, G2: 3}, {G3: 0.0, G2: 0.0}),
    # demand: BIG 0.5 * 8000 = 4000, SMALL 0.5 * 1000 = 500 -> d_BIG = 8/9; BIG accepts all
    # 32 GPUs (M = 32) but only the 8 of the G3 node can hold it (S = 8):
    # reserve(G3) = 8/9 * (32/8 - 1) = 8/3
    ([BIG, SMALL], {G3: 1, G2: 3}, {G3: 8 / 3, G2: 0.0}),
    # two G3 nodes of four: S = 16, M = 32 -> 8/9 * (2 - 1)
    ([BIG, SMALL], {G3: 2, G2: 2}, {G3: 8 / 9, G2: 0.0}),
    # a class no node holds puts pressure nowhere
    ([TaskClass(200_000, MILLI, 1, (), 1.0)], {G3: 1}, {G3: 0.0}),
])
def test_shape_scarcity(classes, kinds, expected):
    assert shape_scarcity(classes, kinds) == pytest.approx(expected)


def test_a_small_task_pays_for_the_rare_home_of_a_large_class_it_takes():
    # requests: BIG, then SMALL (equal weights): d_BIG = 8/9; g3a and g3b are the 16 homes of
    # BIG's 24 GPUs: reserve(G3) = 8/9 * (24/16 - 1) = 4/9.
    # SMALL on g3b (empty): F before 0 (both classes fit); after, 7 GPUs: BIG no longer fits,
    #   0.5 * 7000 = 3500 -> dF = 3500; stranded 0 (124 of 128 cores cover 7.75 GPUs);
    #   spent 1000 * 4/9 -> cost 3944.4
    # SMALL on g2 (empty): BIG never fits (96 cores): F 0.5 * 8000 -> 0.5 * 7000: dF = -500;
    #   no reserve -> cost -500
    st = state_with(node("g3a").gpus(8, "G3").cpu(128), node("g3b").gpus(8, "G3").cpu(128),
                    node("g2").gpus(8, "G2").cpu(96))
    capgd, mix = capgd_following(half_life=1e12)
    assert find_replica(st, arrive(mix, shape(120_000, 8)), capgd, False) is not None
    slot, _ = find_replica(st, arrive(mix, shape(4000, 1)), capgd, False)
    assert slot.name == "g2"
    assert capgd.reserve == pytest.approx({G3: 4 / 9, G2: 0.0})
    assert capgd.cost(st.by_name["g3b"], shape(4000, 1), list(range(8))) == pytest.approx(
        3500 + 4000 / 9)
    assert capgd.cost(st.by_name["g2"], shape(4000, 1), list(range(8))) == pytest.approx(-500)


# -- choices on hand-made nodes ---------------------------------------------------------------

def test_a_cpu_only_task_goes_where_it_strands_the_least_gpu():
    # the mix is this one CPU-only class: F = idle everywhere, dF = 0; no scarcity.
    # g8: 8 GPUs, 96 cores; 32 cores taken -> stranded 2666.7 -> score floor(100/(1+e^2.667)) = 6
    # t2: 2 GPUs, 104 cores; 32 cores taken -> stranded 615.4 -> floor(100/(1+e^0.615)) = 35
    st = state_with(node("g8").gpus(8, "G2").cpu(96), node("t2").gpus(2, "T4").cpu(104))
    capgd, mix = capgd_following()
    slot, positions = find_replica(st, arrive(mix, shape(32_000)), capgd, False)
    assert (slot.name, positions) == ("t2", [])
    g8, t2 = st.by_name["g8"], st.by_name["t2"]
    assert capgd.cost(g8, shape(32_000), []) == pytest.approx(2666.67, abs=0.01)
    assert score_of(capgd.cost(g8, shape(32_000), [])) == 6
    assert score_of(capgd.cost(t2, shape(32_000), [])) == 35


def test_a_flexible_task_pays_for_the_scarce_model_it_spends():
    # first request: one whole T4 (only t can take it) -> t free (0, 1000), 60 cores.
    # then a flexible whole GPU; mix: T4-only 0.5, flexible 0.5 (4 cores each); demand shares
    # 0.5 each; T4 is 2 of 4 GPUs: scarcity(T4) = 0.5 / 0.5 = 1, scarcity(G2) = 0.
    # on t: F before 0 (both classes fit, no fragment), after (0, 0) 0: dF = 0; stranded 0
    #   (1000 idle, 60 cores of 64 cover 1.9 GPUs); spent 1000 * 1 -> cost 1000, score 26
    # on g (1000, 1000), 64 cores: F before 0.5 * 2000 (T4-only cannot use G2) + 0 = 1000,
    #   after (0, 1000) 0.5 * 1000 = 500: dF = -500; stranded 0; spent 0 -> cost -500, score 62
    st = state_with(node("t").gpus(2, "T4").cpu(64), node("g").gpus(2, "G2").cpu(64))
    capgd, mix = capgd_following(half_life=1e12)  # equal weights
    first, _ = place_gang(st, arrive(mix, shape(4000, 1, MILLI, ("T4",))), 1, capgd)
    assert first is not None and first.replicas[0].node == "t"
    slot, _ = find_replica(st, arrive(mix, shape(4000, 1)), capgd, False)
    assert slot.name == "g"
    assert capgd.scarce == pytest.approx({"T4": 1.0, "G2": 0.0})
    assert capgd.cost(st.by_name["t"], shape(4000, 1), [1]) == pytest.approx(1000)
    assert capgd.cost(st.by_name["g"], shape(4000, 1), [0, 1]) == pytest.approx(-500)
    assert (score_of(1000), score_of(-500)) == (26, 62)


def test_a_share_fills_the_partly_used_device_as_fgd_does():
    # one class, share 300 (the request itself). n free (1000, 400), 32 cores:
    # on dev1 -> (1000, 100): F 100 (before 0): +100; on dev0 -> (700, 400): F 0: +0.
    # dF picks dev0 here (FGD's rule: 400 still takes a 300); stranded: 32 cores cover 2.67 GPUs
    # of 2: nothing either way
    st = state_with(node("n").gpus(2, "G2").cpu(32), used=[(0, 0, {1: 600})])
    capgd, mix = capgd_following()
    slot, positions = find_replica(st, arrive(mix, shape(1000, 1, 300)), capgd, False)
    assert positions == [0]
    # a second request of a share of 700: only dev0 (700 free) holds it
    slot, positions = find_replica(st, arrive(mix, shape(1000, 1, 700)), capgd, False)
    assert positions == [0]


def test_no_feasible_node_is_no_placement():
    st = state_with(node("n").gpus(1, "G2").cpu(4))
    capgd, mix = capgd_following()
    assert find_replica(st, arrive(mix, shape(8000, 1)), capgd, False) is None  # 8 cores, 4 here
    assert find_replica(st, arrive(mix, shape(1000, 2)), capgd, False) is None  # 2 GPUs, 1 here


@pytest.mark.parametrize("args, field", [
    ({"half_life": 0}, "placement.args.half_life"),
    ({"coverage": 1.5}, "placement.args.coverage"),
    ({"workload": []}, "placement.args.workload"),  # capgd learns its mix: no prior accepted
])
def test_bad_arguments_name_the_field(args, field):
    with pytest.raises(InvalidSpec) as err:
        create("placement", "capgd", args)
    assert err.value.field == field


def test_capgd_is_a_placement_of_rota_policies():
    policy = build_policy({"preset": "default", "placement": {"name": "capgd", "args": {"seed": 3}}})
    assert policy.placement.name == "capgd"


# -- the packing engine ------------------------------------------------------------------------



def test_capgd_packs_a_slice_of_the_real_trace_at_least_as_well_as_random(trace_slice):
    nodes, pods = trace_slice
    cap = [run(nodes, pods, "capgd", seed=s) for s in (42, 43)]
    rnd = [run(nodes, pods, "random", seed=s).at(100).unallocated for s in (42, 43)]
    assert all(0 < r.failed < r.pods for r in cap)
    assert sum(r.at(100).unallocated for r in cap) < sum(rnd)
