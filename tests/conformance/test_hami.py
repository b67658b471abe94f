"""HAMi's device fit and scoring tests, translated: on which node and which devices one cycle
puts a request, or why it cannot start (pkg/device/nvidia, pkg/scheduler, pkg/scheduler/policy).

A container's device request is one replica of a job: ``nvidia.com/gpu: N`` with ``gpucores``
below 100 and a ``gpumem`` is a fraction (``gpu: cores/100`` of one device, ``gpu_memory`` the
MiB asked; HAMi's cores out of a ``Totalcore`` other than 100 scale to milli-GPU the same way);
``gpucores: 100`` or no share at all is a whole GPU. Device memory keeps HAMi's figures, in
MiB. A device's ``Used``/``Usedcores``/``Usedmem`` are jobs running on it with that share and
memory. HAMi's pair scores between devices (``DevicePairScore``, from NVML's link counts)
become rota's NVLink domains: the devices of the best-linked group share one domain, the
others have none; NUMA stays NUMA. HAMi's GPU policy (``binpack``/``spread``/
``topology-aware``) and node policy are one placement plugin here (``binpack``, ``spread``,
``topology``); a cycle with preemption and backfill off is one filter-and-score pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from builders import GiB, bound, cluster, decide, devices_of, job, rejected, waiting
from conformance.kit import HAMI, Upstream
from rota.core import DeviceShare, GpuDevice, Node, Placement, ReplicaPlacement

BINPACK = {"preset": "besteffort"}                          # binpack, no preemption, no backfill
SPREAD = {"preset": "besteffort", "placement": "spread"}
TOPOLOGY = {"preset": "besteffort", "placement": "topology"}

DEVICE = "pkg/device/nvidia/device_test.go"
SCORE = "pkg/scheduler/score_test.go"
FILTER = "pkg/scheduler/scheduler_test.go"
GPU_POLICY = "pkg/scheduler/policy/gpu_policy_test.go"
NODE_POLICY = "pkg/scheduler/policy/node_policy_test.go"
NUMA_SORT = "pkg/scheduler/numa_sort_test.go"


def up(path: str, test: str, case: str = "") -> Upstream:
    return Upstream(HAMI, path, test, case)


# -- building a case -------------------------------------------------------------------------


def gpus(name: str, *memory_mib: int, nvlink=None, numa=None, model: str = "NVIDIA-A100",
         unhealthy=()) -> Node:
    """A node with one device per ``memory_mib`` (HAMi's Totalmem, in MiB)."""
    devices = tuple(
        GpuDevice(k, model, mem, f"GPU-{name}-{k}", numa[k] if numa else 0,
                  nvlink[k] if nvlink else None, k not in unhealthy)
        for k, mem in enumerate(memory_mib))
    return Node(name, 64_000, 512 * GiB, devices)


def ask(id: str = "pod", share: float = 1, mem_mib: int | None = None, models=(), count=1):
    """A pending request: ``count`` whole GPUs, or a ``share`` of one with ``mem_mib``."""
    mem = None if mem_mib is None else mem_mib / GiB
    return job(id).gpus(share if share < 1 else count, memory_gib=mem, models=models)


def using(id: str, node: str, index: int, milli: int, mem_mib: int):
    """A job already on device ``index`` of ``node`` with ``milli`` of its compute and
    ``mem_mib`` of its memory (HAMi's Usedcores x 10 and Usedmem)."""
    b = job(id).gpus(milli / 1000 if milli < 1000 else 1).running_on((node, [index], milli))
    return b.placement(Placement((ReplicaPlacement(node, (DeviceShare(index, milli, mem_mib),)),)))


@dataclass(frozen=True)
class Bound:
    node: str
    devices: tuple[int, ...]


@dataclass(frozen=True)
class Waits:
    code: str
    resource: str | None = None


@dataclass(frozen=True)
class Rejected:
    code: str
    resource: str | None = None


def outcome(snapshot, policy, job_id: str = "pod"):
    d = decide(snapshot, policy)
    if job_id in bound(d):
        ((where, devs),) = devices_of(bound(d)[job_id])
        return Bound(where, devs)
    found = waiting(d).get(job_id)
    kind = Waits if found is not None else Rejected
    found = found or rejected(d)[job_id]
    first = found.reasons[0]
    return kind(first.code.value, first.resource)


def matches(got, want) -> bool:
    if isinstance(want, (Waits, Rejected)) and want.resource is None:
        return type(got) is type(want) and got.code == want.code
    return got == want


def run(case: Upstream, build, policy, want) -> None:
    got = outcome(build().build(), policy)
    assert matches(got, want), f"{case}: got {got}, want {want}"


# -- one device: fit by memory, share, health, count (TestDevices_Fit and relatives) ----------

T_FIT = "TestDevices_Fit"
T_CERTAIN = "Test_fitInCertainDevice"
T_CORDON = "TestFit_DeviceCordon"

FIT_CASES = [
    pytest.param(
        up(DEVICE, T_FIT, "fit success"),
        # 2 free devices of 128 MiB, 50 cores + 64 MiB fit both. divergence: HAMi's Fit walks
        # its device list from the end and takes dev-1; rota takes the lowest index among
        # equal devices (deterministic, whatever the list order).
        lambda: cluster().nodes(gpus("n", 128, 128)).jobs(ask(share=0.5, mem_mib=64)),
        BINPACK, Bound("n", (0,)), id="fit success"),
    pytest.param(
        up(DEVICE, T_FIT, "fit fail: memory not enough"),
        # 512 MiB > 128 MiB on every device: HAMi fails the node (CardInsufficientMemory).
        # divergence: rota rejects a request no device could ever hold instead of leaving it
        # pending.
        lambda: cluster().nodes(gpus("n", 128)).jobs(ask(share=0.5, mem_mib=512)),
        BINPACK, Rejected("never-fits", "gpu_memory"), id="fit fail: memory not enough"),
    pytest.param(
        up(DEVICE, T_FIT, "fit fail: core not enough"),
        # Usedcores 100 of 100 (two jobs of 50 with 1 MiB each): 50 more cores do not fit.
        lambda: cluster().nodes(gpus("n", 1024)).jobs(
            using("a", "n", 0, 500, 1), using("b", "n", 0, 500, 1),
            ask(share=0.5, mem_mib=512)),
        BINPACK, Waits("resources"), id="fit fail: core not enough"),
    pytest.param(
        up(DEVICE, T_FIT, "fit fail: type mismatch"),
        # The request names a device type the node does not have. rota names devices by GPU
        # model pattern; one that matches no GPU here is rejected.
        lambda: cluster().nodes(gpus("n", 128)).jobs(
            ask(share=0.5, mem_mib=64, models=("OtherType*",))),
        BINPACK, Rejected("no-matching-gpu"), id="fit fail: type mismatch"),
    pytest.param(
        up(DEVICE, T_FIT, "fit fail:  card exclusively"),
        # gpucores 100 asks for the device alone; it already has a sharer (Used 20).
        lambda: cluster().nodes(gpus("n", 1280)).jobs(
            using("a", "n", 0, 100, 0), ask()),
        BINPACK, Waits("resources"), id="fit fail:  card exclusively"),
    pytest.param(
        up(DEVICE, T_FIT, "fit fail:  AllocatedCardsInsufficientRequest"),
        # 2 devices asked, the node has 1. divergence: rejected, not left pending.
        lambda: cluster().nodes(gpus("n", 1280)).jobs(ask(count=2)),
        BINPACK, Rejected("never-fits", "gpu"),
        id="fit fail:  AllocatedCardsInsufficientRequest"),
    pytest.param(
        up(DEVICE, T_FIT, "fit fail: partial allocation AllocatedCardsInsufficientRequest for "
                          "multiple cards"),
        # 3 devices asked, 2 on the node: 3 > 2.
        lambda: cluster().nodes(gpus("n", 1280, 1280)).jobs(ask(count=3)),
        BINPACK, Rejected("never-fits", "gpu"),
        id="fit fail: partial allocation AllocatedCardsInsufficientRequest for multiple cards"),
    pytest.param(
        up(DEVICE, T_FIT, "fit success:  memory percentage"),
        # 10 % of 1280 MiB = 128 MiB and 20 cores, next to 10 cores in use: 10 + 20 <= 100.
        lambda: cluster().nodes(gpus("n", 1280)).jobs(
            using("a", "n", 0, 100, 0), ask(share=0.2, mem_mib=128)),
        BINPACK, Bound("n", (0,)), id="fit success:  memory percentage"),
    pytest.param(
        up(DEVICE, T_FIT, "fit fail:  CardNotHealth"),
        # The only device is unhealthy: the request waits for it (a device may recover).
        lambda: cluster().nodes(gpus("n", 1280, unhealthy=(0,))).jobs(
            ask(share=0.2, mem_mib=128)),
        BINPACK, Waits("resources", "gpu"), id="fit fail:  CardNotHealth"),
    pytest.param(
        up(DEVICE, T_CORDON, "cordoned device is skipped, healthy sibling still fits"),
        # divergence: rota has no device cordon; a device taken out of use is unhealthy.
        lambda: cluster().nodes(gpus("n", 128, 128, unhealthy=(1,))).jobs(
            ask(share=0.5, mem_mib=64)),
        BINPACK, Bound("n", (0,)), id="cordoned device is skipped, healthy sibling still fits"),
    pytest.param(
        up(DEVICE, T_CORDON, "all devices cordoned fails with CardCordoned reason"),
        lambda: cluster().nodes(gpus("n", 128, 128, unhealthy=(0, 1))).jobs(
            ask(share=0.5, mem_mib=64)),
        BINPACK, Waits("resources", "gpu"),
        id="all devices cordoned fails with CardCordoned reason"),
    pytest.param(
        up(DEVICE, T_CORDON, "running pods on a cordoned device are unaffected"),
        # dev-1 (unhealthy here) runs a 50-core job; the new one goes to dev-0 and nothing is
        # evicted (see test_a_job_on_a_device_out_of_use_keeps_running).
        lambda: cluster().nodes(gpus("n", 128, 128, unhealthy=(1,))).jobs(
            using("a", "n", 1, 500, 64), ask(share=0.5, mem_mib=64)),
        BINPACK, Bound("n", (0,)), id="running pods on a cordoned device are unaffected"),
    pytest.param(
        up(SCORE, T_CERTAIN, "allocated device"),
        # Totalcore 4: 1 core is 250 milli. 1 + 1 of 4 cores, 2048 + 1024 of 8192 MiB: fits.
        lambda: cluster().nodes(gpus("n", 8192)).jobs(
            using("a", "n", 0, 250, 2048), ask(share=0.25, mem_mib=1024)),
        BINPACK, Bound("n", (0,)), id="allocated device"),
    pytest.param(
        up(SCORE, T_CERTAIN, "card type don't match"),
        lambda: cluster().nodes(gpus("n", 8192)).jobs(
            ask(share=0.25, mem_mib=1024, models=("test*",))),
        BINPACK, Rejected("no-matching-gpu"), id="card type don't match"),
    pytest.param(
        up(SCORE, T_CERTAIN, "card insufficient remaining memory"),
        # 8000 of 8000 MiB in use by a 1-core job: no memory left for any share.
        lambda: cluster().nodes(gpus("n", 8000)).jobs(
            using("a", "n", 0, 250, 8000), ask(share=0.5, mem_mib=100)),
        BINPACK, Waits("resources", "gpu_memory"), id="card insufficient remaining memory"),
    pytest.param(
        up(SCORE, T_CERTAIN, "the container wants exclusive access to an entire card, but the "
                             "card is already in use"),
        lambda: cluster().nodes(gpus("n", 8192)).jobs(using("a", "n", 0, 10, 2048), ask()),
        BINPACK, Waits("resources"),
        id="the container wants exclusive access to an entire card, but the card is already "
           "in use"),
    pytest.param(
        up(SCORE, T_CERTAIN, "can't allocate core=0 job to an already full GPU"),
        # Every core in use. divergence: a rota fraction always asks for a compute share (no
        # core=0 requests); the smallest one still does not fit a device with none left.
        lambda: cluster().nodes(gpus("n", 8192)).jobs(
            using("a", "n", 0, 500, 1024), using("b", "n", 0, 500, 1024),
            ask(share=0.01, mem_mib=1024)),
        BINPACK, Waits("resources"), id="can't allocate core=0 job to an already full GPU"),
    pytest.param(
        up(SCORE, "Test_calcScore", "one node one device one pod one container use one device "
                                    "and not enough resource,node should be failed."),
        # Totalmem 50 < 1000 MiB asked.
        lambda: cluster().nodes(gpus("node1", 50)).jobs(ask(share=0.3, mem_mib=1000)),
        SPREAD, Rejected("never-fits", "gpu_memory"),
        id="one node one device one pod one container use one device and not enough "
           "resource,node should be failed."),
    pytest.param(
        up(SCORE, "Test_calcScore", "race condition test for failedNodes map with two nodes "
                                    "failing"),
        lambda: cluster().nodes(gpus("node1", 50), gpus("node2", 50)).jobs(
            ask(share=0.3, mem_mib=1000)),
        SPREAD, Rejected("never-fits", "gpu_memory"),
        id="race condition test for failedNodes map with two nodes failing"),
    pytest.param(
        up(DEVICE, "TestFit_MutexPolicy", "one card"),
        # mutex: only idle devices. rota: a whole GPU takes only a wholly free device: idle (1).
        lambda: cluster().nodes(gpus("n", 8192, 8192)).jobs(
            using("a", "n", 0, 10, 100), ask()),
        BINPACK, Bound("n", (1,)), id="TestFit_MutexPolicy/one card"),
    pytest.param(
        up(DEVICE, "TestFit_MutexPolicy", "two cards"),
        # 2 idle devices asked, 1 idle.
        lambda: cluster().nodes(gpus("n", 8192, 8192)).jobs(
            using("a", "n", 0, 10, 100), ask(count=2)),
        BINPACK, Waits("resources"), id="TestFit_MutexPolicy/two cards"),
]


@pytest.mark.parametrize("case,build,policy,want", FIT_CASES)
def test_device_fit(case, build, policy, want):
    run(case, build, policy, want)


def test_a_job_on_a_device_out_of_use_keeps_running():
    # TestFit_DeviceCordon/running pods on a cordoned device are unaffected: no eviction.
    snap = cluster().nodes(gpus("n", 128, 128, unhealthy=(1,))).jobs(
        using("a", "n", 1, 500, 64), ask(share=0.5, mem_mib=64)).build()
    assert not decide(snap, BINPACK).preemptions


# -- which device, which node: binpack, spread, NUMA (Test_calcScore, Test_Filter, policies) --

T_CALC = "Test_calcScore"
T_FILTER = "Test_Filter"
T_LESS = "TestDeviceUsageList_Less"


def filter_lab():
    """Test_Filter's nodes: node1 runs 25 cores + 2000 MiB on device1 (index 0), node2 runs
    75 cores + 6000 MiB on device4 (index 1); every device has 8000 MiB. The pod asks 20 cores
    and 1000 MiB. Node scores (used/count + cores + memory, x 10): node1 (1/20 + 25/200 +
    2000/16000) x 10 = 3, node2 (1/20 + 75/200 + 6000/16000) x 10 = 8."""
    return cluster().nodes(gpus("node1", 8000, 8000), gpus("node2", 8000, 8000)).jobs(
        using("pod1", "node1", 0, 250, 2000), using("pod2", "node2", 1, 750, 6000),
        ask(share=0.2, mem_mib=1000))


def lightly_used(*milli: int, numa=None):
    """One node whose device k runs ``milli[k]`` (0: idle), 8192 MiB each."""
    c = cluster().nodes(gpus("n", *[8192] * len(milli), numa=numa))
    return c.jobs(*[using(f"u{k}", "n", k, m, 0) for k, m in enumerate(milli) if m])


CHOICE_CASES = [
    pytest.param(
        up(SCORE, T_CALC, "one node one device one pod one container use one device."),
        lambda: cluster().nodes(gpus("node1", 8000)).jobs(ask(share=0.3, mem_mib=1000)),
        SPREAD, Bound("node1", (0,)),
        id="one node one device one pod one container use one device."),
    pytest.param(
        up(SCORE, T_CALC, "one node one device one pod one container use one device,but this "
                          "device before having use."),
        # 50 + 30 <= 100 cores, 4000 + 1000 <= 8000 MiB.
        lambda: cluster().nodes(gpus("node1", 8000)).jobs(
            using("a", "node1", 0, 500, 4000), ask(share=0.3, mem_mib=1000)),
        SPREAD, Bound("node1", (0,)),
        id="one node one device one pod one container use one device,but this device before "
           "having use."),
    pytest.param(
        up(SCORE, T_CALC, "one node two device one pod one container use one device"),
        # Two idle devices score the same. divergence: HAMi takes uuid2 (the last in its list);
        # rota the lowest index.
        lambda: cluster().nodes(gpus("node1", 8000, 8000)).jobs(ask(share=0.3, mem_mib=1000)),
        SPREAD, Bound("node1", (0,)),
        id="one node two device one pod one container use one device"),
    pytest.param(
        up(SCORE, T_CALC, "one node two device one pod one container use one device,but having "
                          "use 50%"),
        # GPU policy spread: uuid1 (idle, index 0) before uuid2 (50 cores, 4000 MiB in use).
        lambda: cluster().nodes(gpus("node1", 8000, 8000)).jobs(
            using("a", "node1", 1, 500, 4000), ask(share=0.3, mem_mib=1000)),
        SPREAD, Bound("node1", (0,)),
        id="one node two device one pod one container use one device,but having use 50%"),
    pytest.param(
        up(SCORE, T_CALC, "one node two device one pod one container use two device"),
        # divergence: HAMi shares 30 cores of each of two devices; rota's requests of several
        # devices are whole GPUs (both idle here).
        lambda: cluster().nodes(gpus("node1", 8000, 8000)).jobs(ask(count=2)),
        SPREAD, Bound("node1", (0, 1)),
        id="one node two device one pod one container use two device"),
    pytest.param(
        up(SCORE, T_CALC, "one node two device one pod one container use two device,but this "
                          "two device before having use."),
        # Each device runs 50 cores: HAMi puts 30 more on each. divergence: rota shares only
        # one device per replica, so two GPUs must be wholly free: the request waits.
        lambda: cluster().nodes(gpus("node1", 8000, 8000)).jobs(
            using("a", "node1", 0, 500, 4000), using("b", "node1", 1, 500, 4000),
            ask(count=2)),
        SPREAD, Waits("resources"),
        id="one node two device one pod one container use two device,but this two device "
           "before having use."),
    pytest.param(
        up(SCORE, T_CALC, "two node per node having one device one pod one container use one "
                          "device"),
        # Both nodes fit with score 0; HAMi's pick among equal scores follows its node map.
        # rota: name order, node1.
        lambda: cluster().nodes(gpus("node1", 8000), gpus("node2", 8000)).jobs(
            ask(share=0.3, mem_mib=1000)),
        BINPACK, Bound("node1", (0,)),
        id="two node per node having one device one pod one container use one device"),
    pytest.param(
        up(SCORE, T_CALC, "two node per node having one device one pod one container use one "
                          "device,one device having use 50%"),
        # Node policy binpack: node1 scores (5/10 + 50/100 + 4000/8000) x 10 = 15 > node2's 0.
        lambda: cluster().nodes(gpus("node1", 8000), gpus("node2", 8000)).jobs(
            using("a", "node1", 0, 500, 4000), ask(share=0.3, mem_mib=1000)),
        BINPACK, Bound("node1", (0,)),
        id="two node per node having one device one pod one container use one device,one "
           "device having use 50%"),
    pytest.param(
        up(FILTER, T_FILTER, "node use binpack gpu use binpack policy"),
        # node2 (8 > 3), then its fullest device that fits: device4 (75 + 20 <= 100).
        filter_lab, BINPACK, Bound("node2", (1,)), id="node use binpack gpu use binpack policy"),
    pytest.param(
        up(FILTER, T_FILTER, "node use binpack gpu use spread policy"),
        # HAMi: node2, and device3 or device4 (the test accepts both). divergence: rota has one
        # direction for nodes and devices; binpack gives node2's device4, one of the two.
        filter_lab, BINPACK, Bound("node2", (1,)), id="node use binpack gpu use spread policy"),
    pytest.param(
        up(FILTER, T_FILTER, "node use spread gpu use binpack policy"),
        # HAMi: node1 (3 < 8), its fullest device, device1 (index 0). divergence: rota's spread
        # spreads devices too: node1's idle device2 (index 1). No policy packs devices on the
        # emptiest node.
        filter_lab, SPREAD, Bound("node1", (1,)), id="node use spread gpu use binpack policy"),
    pytest.param(
        up(FILTER, T_FILTER, "node use spread gpu use spread policy"),
        # node1, its emptiest device: device2 (index 1).
        filter_lab, SPREAD, Bound("node1", (1,)), id="node use spread gpu use spread policy"),
    pytest.param(
        up(GPU_POLICY, T_LESS, "Binpack: score primary, lower score sorts first across NUMA"),
        # device 0 (NUMA 1) runs 100 milli, device 1 (NUMA 0) 200: binpack takes the fuller,
        # whatever its NUMA node.
        lambda: lightly_used(100, 200, numa=[1, 0]).jobs(ask(share=0.1, mem_mib=100)),
        BINPACK, Bound("n", (1,)),
        id="Binpack: score primary, lower score sorts first across NUMA"),
    pytest.param(
        up(GPU_POLICY, T_LESS, "Spread: score primary, lower score sorts last across NUMA"),
        lambda: lightly_used(100, 200, numa=[1, 0]).jobs(ask(share=0.1, mem_mib=100)),
        SPREAD, Bound("n", (0,)),
        id="Spread: score primary, lower score sorts last across NUMA"),
    pytest.param(
        up(GPU_POLICY, T_LESS, "Binpack: NUMA tiebreaker when scores equal"),
        # Equal devices on NUMA 0 and 1: HAMi sorts NUMA 0 first and takes from the end, the
        # NUMA 1 device. divergence: between equal devices rota takes the lowest index.
        lambda: lightly_used(0, 0, numa=[0, 1]).jobs(ask(share=0.1, mem_mib=100)),
        BINPACK, Bound("n", (0,)), id="Binpack: NUMA tiebreaker when scores equal"),
    pytest.param(
        up(NUMA_SORT, "TestScorePrimarySelectsAcrossNuma"),
        # P (NUMA 0) is the idlest, Q and R (NUMA 1) run 800 and 500: spread takes P.
        lambda: lightly_used(100, 800, 500, numa=[0, 1, 1]).jobs(ask(share=0.1, mem_mib=100)),
        SPREAD, Bound("n", (0,)), id="TestScorePrimarySelectsAcrossNuma"),
    pytest.param(
        up(NUMA_SORT, "TestNumaBindSortPreservesAffinity"),
        # A and B on NUMA 0, C on NUMA 1; two cards bound to one NUMA node: A and B. rota
        # prefers one NUMA node for a replica's GPUs without being asked.
        lambda: lightly_used(0, 0, 0, numa=[0, 0, 1]).jobs(ask(count=2)),
        SPREAD, Bound("n", (0, 1)), id="TestNumaBindSortPreservesAffinity"),
    pytest.param(
        up(DEVICE, "TestFit_NumaSwitching"),
        # dev-0 and dev-1 on NUMA 1, dev-2 on NUMA 0; two cards on one NUMA node: dev-0, dev-1.
        lambda: lightly_used(0, 0, 0, numa=[1, 1, 0]).jobs(ask(count=2)),
        BINPACK, Bound("n", (0, 1)), id="TestFit_NumaSwitching"),
    pytest.param(
        up(SCORE, T_CERTAIN, "numa not fit"),
        # test-0 on NUMA 0, test-1 on NUMA 1, numa-bind asks both on one node: HAMi fails.
        # divergence: NUMA is a preference in rota, never a requirement: both devices.
        lambda: lightly_used(0, 0, numa=[0, 1]).jobs(ask(count=2)),
        BINPACK, Bound("n", (0, 1)), id="numa not fit"),
    pytest.param(
        up(SCORE, "TestCalcScoreUsesPodDeviceScoringWeights", "default weights"),
        # binpack: gpu-a (90 cores in use) before gpu-b (10 cores). The share asked must fit
        # in gpu-a's 10 free cores (HAMi asks 0).
        lambda: lightly_used(900, 100).jobs(ask(share=0.05, mem_mib=1000)),
        BINPACK, Bound("n", (0,)), id="TestCalcScoreUsesPodDeviceScoringWeights"),
    pytest.param(
        up(SCORE, "TestCalcScoreUsesDeviceScoringWeightsAsTopologyTieBreaker", "default weights"),
        # Equal link scores; HAMi's topology-aware policy then orders devices as spread does:
        # gpu-b (10 cores in use) before gpu-a (90). divergence: rota's topology placement
        # packs (gpu-a); spread gives HAMi's answer (see the test below).
        lambda: lightly_used(900, 100).jobs(ask(share=0.05, mem_mib=1000)),
        TOPOLOGY, Bound("n", (0,)), id="TestCalcScoreUsesDeviceScoringWeightsAsTopologyTieBreaker"),
]


@pytest.mark.parametrize("case,build,policy,want", CHOICE_CASES)
def test_device_and_node_choice(case, build, policy, want):
    run(case, build, policy, want)


def test_spread_orders_equally_linked_devices_as_hamis_topology_policy():
    # TestCalcScoreUsesDeviceScoringWeightsAsTopologyTieBreaker: the option that gives gpu-b.
    snap = lightly_used(900, 100).jobs(ask(share=0.05, mem_mib=1000)).build()
    assert outcome(snap, SPREAD) == Bound("n", (1,))


@pytest.mark.parametrize("policy,fuller_node_first,want", [
    # TestLess: spread sorts the higher score first and takes the last (the lower score);
    # binpack the other way round. node1 runs 500 milli when it is the fuller one.
    pytest.param(SPREAD, True, "node2", id="Spread strategy, i score higher"),
    pytest.param(SPREAD, False, "node1", id="Spread strategy,j score higher"),
    pytest.param(BINPACK, False, "node2", id="Default strategy (Binpack), i score lower"),
    pytest.param(BINPACK, True, "node1", id="Default strategy (Binpack), j score lower"),
])
def test_node_policy(policy, fuller_node_first, want):
    case = up(NODE_POLICY, "TestLess")
    busy = "node1" if fuller_node_first else "node2"
    snap = cluster().nodes(gpus("node1", 8000), gpus("node2", 8000)).jobs(
        using("a", busy, 0, 500, 4000), ask(share=0.2, mem_mib=1000)).build()
    assert outcome(snap, policy).node == want, str(case)


# -- NVLink: the worst-linked card for one, the best-linked set for several ------------------
#
# HAMi's pair scores become domains: the pairs that score highest share one NVLink domain.

def linked(nvlink, holders=()):
    """One node with a device per entry of ``nvlink`` (8192 MiB each); ``holders`` lists
    (index, milli, MiB) already in use."""
    c = cluster().nodes(gpus("node-1", *[8192] * len(nvlink), nvlink=list(nvlink)))
    return c.jobs(*[using(f"u{k}", "node-1", k, m, mem) for k, m, mem in holders])


# every device of Test_Nvidia_GPU_Topology runs 1 core of 100 and 2048 of 8192 MiB
SIX_IN_USE = [(k, 10, 2048) for k in range(6)]

TOPOLOGY_CASES = [
    pytest.param(
        up(DEVICE, "TestFit_TopologyWorstSingleCard"),
        # link totals: dev-0 100 + 200 = 300, dev-1 100 + 150 = 250, dev-2 200 + 150 = 350:
        # worst dev-1. Domains: {dev-0, dev-2} (the 200 pair), dev-1 alone: dev-1 splits no
        # free domain (0 free NVLink neighbours against 1). divergence: rota reads links as
        # domains, not weighted pairs.
        lambda: linked(["x", None, "x"]).jobs(ask(share=0.1, mem_mib=100)),
        TOPOLOGY, Bound("node-1", (1,)), id="TestFit_TopologyWorstSingleCard"),
    pytest.param(
        up(DEVICE, "TestComputeWorstSingleCard"),
        # the same scores as above: gpu1.
        lambda: linked(["x", None, "x"]).jobs(ask(share=0.1, mem_mib=100)),
        BINPACK, Bound("node-1", (1,)), id="TestComputeWorstSingleCard"),
    pytest.param(
        up(DEVICE, "TestFit_TopologyBestCombination"),
        # pairs: (0,1) 100, (0,2) 200, (1,2) 150: best (dev-0, dev-2), one domain here.
        lambda: linked(["x", None, "x"]).jobs(ask(count=2)),
        TOPOLOGY, Bound("node-1", (0, 2)), id="TestFit_TopologyBestCombination"),
    pytest.param(
        up(DEVICE, "TestComputeBestCombination"),
        lambda: linked(["x", None, "x"]).jobs(ask(count=2)),
        BINPACK, Bound("node-1", (0, 2)), id="TestComputeBestCombination"),
    pytest.param(
        up(DEVICE, "TestFit_TopologyBestCombinationZeroScores"),
        # no links at all: any two devices; rota the lowest indices.
        lambda: linked([None, None, None]).jobs(ask(count=2)),
        TOPOLOGY, Bound("node-1", (0, 1)), id="TestFit_TopologyBestCombinationZeroScores"),
    pytest.param(
        up(DEVICE, "TestFit_TopologyExactMatch"),
        lambda: linked([None, None]).jobs(ask(count=2)),
        TOPOLOGY, Bound("node-1", (0, 1)), id="TestFit_TopologyExactMatch"),
    pytest.param(
        up(DEVICE, "TestFit_TopologyNegativeScores", "SingleGPU"),
        # totals: dev-0 -5 - 3 = -8, dev-1 -5 - 1 = -6, dev-2 -3 - 1 = -4: worst dev-0. The
        # best pair (dev-1, dev-2: -1) is the domain; dev-0 has none.
        lambda: linked([None, "x", "x"]).jobs(ask(share=0.1, mem_mib=100)),
        TOPOLOGY, Bound("node-1", (0,)), id="SingleGPU"),
    pytest.param(
        up(DEVICE, "TestFit_TopologyNegativeScores", "MultiGPU"),
        lambda: linked([None, "x", "x"]).jobs(ask(count=2)),
        TOPOLOGY, Bound("node-1", (1, 2)), id="MultiGPU"),
    pytest.param(
        up(SCORE, "Test_Nvidia_GPU_Topology", "test nvidia gpu topology-aware"),
        # a, c, f link at 100 with each other, every other pair at 1: 3 cards -> {f, c, a}
        # (positions 0, 2, 5). divergence: HAMi shares 20 cores of each of three devices in
        # use; rota's several devices are whole GPUs, so the devices are idle here.
        lambda: linked(["x", None, "x", None, None, "x"]).jobs(ask(count=3)),
        TOPOLOGY, Bound("node-1", (0, 2, 5)), id="test nvidia gpu topology-aware"),
    pytest.param(
        up(SCORE, "Test_Nvidia_GPU_Topology", "test Single Card Topology "),
        # a..e link at 100 with each other, f at 1 with all: f totals 5 against 404 for the
        # others. All six run 1 core and 2048 MiB, so none is wholly free: among devices
        # equally in use, f has no NVLink neighbour that could take the share (a..e have 4).
        lambda: linked(["x"] * 5 + [None], SIX_IN_USE).jobs(ask(share=0.2, mem_mib=1024)),
        TOPOLOGY, Bound("node-1", (5,)), id="test Single Card Topology "),
]


@pytest.mark.parametrize("case,build,policy,want", TOPOLOGY_CASES)
def test_nvlink_topology(case, build, policy, want):
    run(case, build, policy, want)


# -- GPU model selection (Test_checkType, TestCheckGPUtype_*) ---------------------------------
#
# HAMi's use-gputype / nouse-gputype annotations list substrings of the card type, matched
# without case; rota's gpu_model lists shell patterns. divergence: a substring ``A10`` is the
# pattern ``*A10*`` here, and rota has no exclusion list: a job names the models it accepts
# (``*A10`` accepts an A10 and not an A100).

MODEL_CASES = [
    pytest.param(
        up(DEVICE, "Test_checkType", "use set GPUInUse don't set GPUNoUse annotation,device match"),
        # use A10 on an "NVIDIA A100": A10 is a substring of A100 -> fits.
        "NVIDIA A100", ("*A10*",), True,
        id="use set GPUInUse don't set GPUNoUse annotation,device match"),
    pytest.param(
        up(DEVICE, "Test_checkType", "use set GPUInUse set GPUNoUse annotation,device don't match"),
        # use A10, not A100, on an A100 -> no.
        "NVIDIA A100", ("*A10",), False,
        id="use set GPUInUse set GPUNoUse annotation,device don't match"),
    pytest.param(
        up(DEVICE, "Test_checkType", "use set GPUInUse set GPUNoUse annotation,device match"),
        "NVIDIA A10", ("*A10",), True,
        id="use set GPUInUse set GPUNoUse annotation,device match"),
    pytest.param(
        up(DEVICE, "TestCheckGPUtype_NoUse", "A100"),
        # nouse A100: an A100 is refused ...
        "NVIDIA-A100", ("*V100*",), False, id="TestCheckGPUtype_NoUse/A100"),
    pytest.param(
        up(DEVICE, "TestCheckGPUtype_NoUse", "V100"),
        # ... a V100 accepted.
        "NVIDIA-V100", ("*V100*",), True, id="TestCheckGPUtype_NoUse/V100"),
    pytest.param(
        up(DEVICE, "TestCheckGPUtype_InUseMismatch"),
        "NVIDIA-V100", ("*A100*",), False, id="TestCheckGPUtype_InUseMismatch"),
    pytest.param(
        up(DEVICE, "TestCheckGPUtype_EmptyAnnotation"),
        # an empty list constrains nothing
        "NVIDIA-A100", (), True, id="TestCheckGPUtype_EmptyAnnotation"),
]


@pytest.mark.parametrize("case,model,patterns,fits", MODEL_CASES)
def test_gpu_model_selection(case, model, patterns, fits):
    snap = cluster().nodes(gpus("n", 8192, model=model)).jobs(
        ask(share=0.5, mem_mib=1024, models=patterns)).build()
    want = Bound("n", (0,)) if fits else Rejected("no-matching-gpu")
    got = outcome(snap, BINPACK)
    assert matches(got, want), f"{case}: got {got}, want {want}"


def test_a_model_pattern_picks_its_node_among_others():
    # TestCheckGPUtype_NoUse on a cluster of both: the job that refuses A100 lands on the V100.
    snap = cluster().nodes(gpus("a", 8192, model="NVIDIA-A100"),
                           gpus("v", 8192, model="NVIDIA-V100")).jobs(
        ask(share=0.5, mem_mib=1024, models=("*V100*",))).build()
    assert outcome(snap, BINPACK) == Bound("v", (0,))
