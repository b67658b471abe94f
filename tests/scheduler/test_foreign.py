"""Work outside rota (a job submitted to Slurm directly, a Pod of another scheduler) holds what
its backend reports, and rota never books it twice; a node whose backend reports a problem takes
nothing new.

Each case: one 4-GPU node (64 cores, 512 GiB) and what holds part of it outside rota.
"""

from __future__ import annotations

import pytest

from builders import GiB, bound, cluster, decide, devices_of, job, node, waiting
from rota.scheduler import ReasonCode

PACK = {"preset": "besteffort"}


def test_gpus_held_outside_rota_are_not_given_to_a_job():
    # GPUs 0 and 2 are a plain sbatch job's: a 2-GPU job gets 1 and 3, a 1-GPU job then nothing
    snap = cluster().nodes(node("n1").gpus(4).held_by("slurm job 7 (omar)", gpus=[0, 2])).jobs(
        job("two").gpus(2), job("one").gpus(1).submitted(1)).build()
    d = decide(snap, PACK)
    assert devices_of(bound(d)["two"]) == [("n1", (1, 3))]
    (reason,) = waiting(d)["one"].reasons
    assert reason.code is ReasonCode.RESOURCES


def test_a_share_held_outside_rota_leaves_the_rest_of_the_device():
    # 0.5 of GPU 0 and 40 GiB of its memory are another scheduler's: a 0.5 job with 40 GiB fits
    # beside it on GPU 0 (binpack), a 0.5 job asking 60 GiB does not fit there
    snap = cluster().nodes(node("n1").gpus(1).held_by("pod ml/infer-0",
                                                        share=(0, 500, 40 * GiB))).jobs(
        job("half").gpus(0.5, memory_gib=40), job("greedy").gpus(0.5, memory_gib=60).submitted(1),
    ).build()
    d = decide(snap, PACK)
    assert devices_of(bound(d)["half"]) == [("n1", (0,))]
    assert "greedy" in waiting(d)


@pytest.mark.parametrize("cpu, memory_gib, fits", [(60, 0, False), (0, 500, False), (32, 256, True)],
                         ids=["cpu-taken", "memory-taken", "room-left"])
def test_cpu_and_memory_held_outside_rota_count(cpu, memory_gib, fits):
    # the job asks 8 cores and 16 GiB of a 64-core, 512-GiB node
    snap = cluster().nodes(node("n1").gpus(4).held_by("slurm job 9", cpu=cpu,
                                                        memory_gib=memory_gib)).jobs(
        job("j").gpus(1).cpu(8).memory(16)).build()
    assert ("j" in bound(decide(snap, PACK))) is fits


def test_a_node_with_a_backend_problem_takes_nothing_new():
    snap = cluster().nodes(node("n1").gpus(4).problem("drained in Slurm: bad fan"),
                           node("n2").gpus(4)).jobs(job("j").gpus(4)).build()
    assert devices_of(bound(decide(snap, PACK))["j"]) == [("n2", (0, 1, 2, 3))]


def test_foreign_holdings_must_name_devices_the_node_has():
    from rota.core import DeviceShare, Foreign, InvalidSpec, Node
    with pytest.raises(InvalidSpec) as err:
        Node("n1", 1000, 1024, (), foreign=(Foreign(devices=(DeviceShare(3, 1000, 1),),
                                                    holder="slurm job 1"),))
    assert err.value.field == "foreign" and "GPU 3" in err.value.reason
