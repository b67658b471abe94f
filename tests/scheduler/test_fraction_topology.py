"""Which device a one-device request (a fraction, or one whole GPU) takes inside a node: the
pack/spread level first, then the device that splits the fewest free NVLink domains, then the
lowest index; and, under the ``topology`` placement, which node.

Policies switch preemption and backfill off so that placement alone is under test.
"""

from __future__ import annotations

import random

import pytest

from builders import ANY_POOL, bound, cluster, decide, devices_of, job, node
from rota.core import DeviceShare
from rota.scheduler.placement import PACK, SPREAD, Shape, choose_devices
from rota.scheduler.state import ClusterState

PACK_POLICY = {"preset": "besteffort"}                          # binpack
SPREAD_POLICY = {"preset": "besteffort", "placement": "spread"}
TOPOLOGY = {"preset": "besteffort", "placement": "topology"}


def device_of(snap, policy, job_id: str = "f") -> tuple[str, tuple[int, ...]]:
    (where,) = devices_of(bound(decide(snap, policy))[job_id])
    return where


# -- inside a node ---------------------------------------------------------------------------

@pytest.mark.parametrize("policy", [PACK_POLICY, SPREAD_POLICY], ids=["binpack", "spread"])
def test_a_fraction_takes_an_unlinked_gpu_before_one_of_a_free_nvlink_pair(policy):
    # Devices 0 and 1 share NVLink domain x, 2 has none; all free. Taking 0 or 1 would split
    # the free pair (1 free neighbour each); 2 splits nothing (0).
    snap = cluster().nodes(node("n1").gpus(3, nvlink=["x", "x", None])).jobs(
        job("f").gpus(0.5)).build()
    assert device_of(snap, policy) == ("n1", (2,))


@pytest.mark.parametrize("policy", [PACK_POLICY, SPREAD_POLICY], ids=["binpack", "spread"])
def test_a_fraction_goes_to_a_domain_already_partly_taken(policy):
    # Domains x = {0, 1}, y = {2, 3}; device 0 is held whole. Device 1 has no free NVLink
    # neighbour left (0), devices 2 and 3 have one each: the fraction takes 1, y stays whole.
    snap = cluster().nodes(node("n1").gpus(4, nvlink=["x", "x", "y", "y"])).jobs(
        job("r").gpus(1).running_on(("n1", [0])),
        job("f").gpus(0.25)).build()
    assert device_of(snap, policy) == ("n1", (1,))


def test_binpack_still_stacks_a_fraction_on_a_device_in_use_first():
    # Device 3 (domain y) has 0.5 in use: binpack's level (the least free share that holds
    # 0.25) comes before topology, and stacking splits no free GPU at all.
    snap = cluster().nodes(node("n1").gpus(4, nvlink=["x", "x", "y", "y"])).jobs(
        job("h").gpus(0.5).running_on(("n1", [3], 500)),
        job("f").gpus(0.25)).build()
    assert device_of(snap, PACK_POLICY) == ("n1", (3,))


def test_spread_takes_the_emptiest_device_that_splits_no_free_domain():
    # Device 2 (domain y) has 0.5 in use. Spread wants a wholly free device: 0 and 1 would
    # split the free pair x (1 free neighbour each), 3 has none left (2 is in use): 3, where
    # the lowest index alone would have said 0.
    snap = cluster().nodes(node("n1").gpus(4, nvlink=["x", "x", "y", "y"])).jobs(
        job("h").gpus(0.5).running_on(("n1", [2], 500)),
        job("f").gpus(0.25)).build()
    assert device_of(snap, SPREAD_POLICY) == ("n1", (3,))


def test_among_devices_equally_in_use_the_worst_linked_takes_the_fraction():
    # Every device has 0.1 in use, so none is wholly free and the level ties. Devices 0-2 share
    # domain x (2 neighbours that could take the fraction each), 3 has no NVLink (0): as HAMi's
    # topology-aware policy picks the candidate with the lowest link score to the others.
    snap = cluster().nodes(node("n1").gpus(4, nvlink=["x", "x", "x", None])).jobs(
        *[job(f"u{k}").gpus(0.1).running_on(("n1", [k], 100)) for k in range(4)],
        job("f").gpus(0.3)).build()
    assert device_of(snap, PACK_POLICY) == ("n1", (3,))


def test_numa_decides_between_devices_without_nvlink():
    # No NVLink; NUMA 0 = {0, 1}, NUMA 1 = {2, 3}, device 3 held whole. Device 2 has no free
    # NUMA neighbour (0), devices 0 and 1 one each: 2.
    snap = cluster().nodes(node("n1").gpus(4, numa=[0, 0, 1, 1])).jobs(
        job("r").gpus(1).running_on(("n1", [3])),
        job("f").gpus(0.5)).build()
    assert device_of(snap, PACK_POLICY) == ("n1", (2,))


def test_one_whole_gpu_takes_an_unlinked_device_before_splitting_a_pair():
    snap = cluster().nodes(node("n1").gpus(3, nvlink=["x", "x", None])).jobs(
        job("f").gpus(1)).build()
    assert device_of(snap, PACK_POLICY) == ("n1", (2,))


def test_one_whole_gpu_takes_the_smallest_free_domain():
    # x = {0, 1, 2} all free (2 free neighbours each), y = {3, 4} all free (1 each): 3.
    snap = cluster().nodes(node("n1").gpus(5, nvlink=["x", "x", "x", "y", "y"])).jobs(
        job("f").gpus(1)).build()
    assert device_of(snap, PACK_POLICY) == ("n1", (3,))


def test_a_fraction_placed_by_topology_leaves_a_domain_whole_for_a_pair():
    # x = {0, 1}, y = {2, 3}, device 2 held whole. The lowest free index (0) would split x and
    # the 2-GPU job after it would span both domains; the fraction takes 3 (no free neighbour
    # left in y) and the pair gets x.
    snap = cluster().nodes(node("n1").gpus(4, nvlink=["x", "x", "y", "y"])).jobs(
        job("r").gpus(1).running_on(("n1", [2])),
        job("f").gpus(0.5).submitted(1),
        job("pair").gpus(2).submitted(2)).build()
    b = bound(decide(snap, PACK_POLICY))
    assert devices_of(b["f"]) == [("n1", (3,))]
    assert devices_of(b["pair"]) == [("n1", (0, 1))]


# -- which node, under the topology placement ------------------------------------------------

def test_topology_placement_prefers_the_node_where_a_fraction_splits_no_domain():
    # Both nodes have only wholly free devices. Binpack takes n1 (2 GPUs free against 3), where
    # the fraction would split the free pair x; topology scores n1 at 2 - 1 = 1 and n2, whose
    # device 2 has no NVLink, at 2: n2.
    snap = cluster().nodes(node("n1").gpus(2, nvlink=["x", "x"]),
                           node("n2").gpus(3, nvlink=["y", "y", None])).jobs(
        job("f").gpus(0.5)).build()
    assert device_of(snap, PACK_POLICY) == ("n1", (0,))
    assert device_of(snap, TOPOLOGY) == ("n2", (2,))


def test_topology_placement_still_stacks_fractions_first():
    # n1 has a device in use with room: stacking there splits nothing (score 2), and binpack
    # order put it first.
    snap = cluster().nodes(node("n1").gpus(2, nvlink=["x", "x"]),
                           node("n2").gpus(3, nvlink=["y", "y", None])).jobs(
        job("h").gpus(0.5).running_on(("n1", [1], 500)),
        job("f").gpus(0.25)).build()
    assert device_of(snap, TOPOLOGY) == ("n1", (1,))


# -- order independence ----------------------------------------------------------------------

def _random_node(rng: random.Random, name: str):
    count = rng.choice([2, 3, 4, 8])
    links = [rng.choice([None, "a", "b", "c"]) for _ in range(count)]
    numa = [rng.choice([0, 1]) for _ in range(count)]
    return node(name).gpus(count, nvlink=links, numa=numa)


def _random_takes(rng: random.Random, slot_count: int) -> list[tuple[int, int]]:
    """(position, milli) shares to hold on one node."""
    held = []
    for p in range(slot_count):
        roll = rng.random()
        if roll < 0.3:
            held.append((p, 1000))
        elif roll < 0.6:
            held.append((p, rng.choice([100, 250, 500, 700])))
    return held


def _take(state: ClusterState, slot, held) -> None:
    for p, milli in held:
        state.take(slot, 0, 0, [DeviceShare(p, milli, milli * slot.dev_mem[p] // 1000)], [p])


@pytest.mark.parametrize("seed", range(40))
def test_the_device_depends_only_on_the_free_state_now(seed):
    rng = random.Random(seed)
    built = _random_node(rng, "n").build()
    held = _random_takes(rng, len(built.devices))
    once = ClusterState((built,))
    _take(once, once.slots[0], held)
    # the same shares taken in another order, after a detour that took and gave back more
    other = ClusterState((built,))
    slot = other.slots[0]
    detour = [(p, 1000) for p in range(len(built.devices)) if p not in dict(held)]
    _take(other, slot, detour)
    _take(other, slot, list(reversed(held)))
    for p, milli in detour:
        other.give(slot, 0, 0, ((p, milli, milli * slot.dev_mem[p] // 1000),))
    for share in (100, 250, 500, 1000):
        for direction in (PACK, SPREAD):
            one = Shape(0, 0, 1, share, None, (), (), ANY_POOL)
            assert choose_devices(once.slots[0], one, direction, False) == \
                choose_devices(slot, one, direction, False)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("policy", [PACK_POLICY, SPREAD_POLICY, TOPOLOGY],
                         ids=["binpack", "spread", "topology"])
def test_fractions_land_the_same_whatever_the_order_of_the_nodes(seed, policy):
    rng = random.Random(seed)
    nodes = [_random_node(rng, f"n{k}") for k in range(4)]
    jobs = [job(f"j{k}").gpus(rng.choice([0.25, 0.5, 1])).submitted(k) for k in range(6)]
    snap = cluster().nodes(*nodes).jobs(*jobs).build()
    rng.shuffle(nodes)
    shuffled = cluster().nodes(*nodes).jobs(*jobs).build()
    assert decide(snap, policy).binds == decide(shuffled, policy).binds

