"""Slurm nodes as rota's nodes, and what jobs outside rota hold on them."""

from dataclasses import replace

import pytest

from rota.backends.slurm.nodes import (
    ForeignAllocation, GpuType, allocated_devices, fractional_refusal, inventory, node_report,
    parse_gpu_types, shards_for,
)
from rota.backends.slurm.records import NodeAllocation, parse_sinfo, parse_squeue
from rota.backends.slurm.text import Gres
from rota.core import DeviceShare, InvalidSpec
from slurmkit import GPU_TYPES, data, slurm_node


def captured():
    return inventory(parse_sinfo(data("sinfo.json")), parse_squeue(data("squeue.json")),
                     GPU_TYPES)


def test_nodes_carry_gpus_of_the_declared_models_and_partition_labels():
    inv = captured()
    one, three = inv.report("node1"), inv.report("node3")
    assert [d.model for d in one.node.devices] == ["H100-80GB"] * 4
    assert [d.index for d in one.node.devices] == [0, 1, 2, 3]
    assert one.node.devices[0].memory_mib == 80 * 1024
    assert [d.model for d in three.node.devices] == ["A100-40GB"] * 4
    assert (one.node.cpu_milli, one.node.memory_mib) == (16000, 64000)
    assert one.node.labels == {"slurm.partition.debug": "true"}
    assert three.node.labels == {"slurm.partition.debug": "true", "slurm.partition.high": "true"}
    assert (one.shards_per_gpu, one.gpu_types) == (4, ("h100",) * 4)


def test_down_and_drained_nodes_are_unschedulable_with_slurms_reason():
    inv = captured()
    assert inv.reasons == {"node3": "down in Slurm: bad gpu",
                           "node4": "drained in Slurm: disk full"}
    assert [n.schedulable for n in inv.nodes] == [True, True, False, False]


def test_jobs_rota_did_not_submit_are_foreign_allocations():
    inv = captured()
    # job 8: 2 H100s (IDX 0-1), 4 cores, 4000 MiB on node1; job 9: 1 of GPU 0's 4 shards on
    # node2 = 250 milli-GPU and a quarter of 80 GiB. rota's own job 10 (rota-7-1, comment
    # rota:7), the pending job 13 and the ended ones hold nothing foreign.
    assert inv.foreign == (
        ForeignAllocation(8, "train-foreign", "root", "node1", 4000, 4000,
                          (DeviceShare(0, 1000, 81920), DeviceShare(1, 1000, 81920))),
        ForeignAllocation(9, "notebook", "root", "node2", 1000, 1000,
                          (DeviceShare(0, 250, 20480),)),
    )


def test_a_gpu_type_without_a_model_leaves_the_node_unschedulable_without_gpus():
    types = {"h100": GPU_TYPES["h100"]}
    inv = inventory(parse_sinfo(data("sinfo.json")), (), types)
    assert inv.report("node3").node.devices == ()
    assert inv.reasons["node4"] == ("drained in Slurm: disk full; GPU type 'a100' has no "
                                    "model in rota's Slurm gpu_types")
    untyped = node_report(slurm_node(gres=[Gres("gpu", None, 2)]), types)
    assert "untyped" in untyped.reason and untyped.node.devices == ()
    typed = node_report(slurm_node(gres=[Gres("gpu", None, 2)]), {"": GpuType("T4", 16384)})
    assert [d.model for d in typed.node.devices] == ["T4", "T4"] and typed.reason is None


def test_several_gpu_types_on_one_node_are_numbered_in_gres_order():
    report = node_report(slurm_node(gres=[Gres("gpu", "a100", 1), Gres("gpu", "h100", 2)]),
                         GPU_TYPES)
    assert [(d.index, d.model) for d in report.node.devices] == [
        (0, "A100-40GB"), (1, "H100-80GB"), (2, "H100-80GB")]
    assert report.gpu_types == ("a100", "h100", "h100")
    assert report.shards_per_gpu == 0          # no shard GRES
    # CPUs are Slurm's CPUs (threads), features become labels too
    featured = node_report(slurm_node(features=("ib", "nvme")), GPU_TYPES)
    assert featured.node.cpu_milli == 32000
    assert featured.node.labels["slurm.feature.ib"] == "true"


def test_gpu_types_table_uses_rotas_gpu_spelling():
    assert parse_gpu_types({"h100": "H100-80GB", "": "T4:16Gi"}) == {
        "h100": GpuType("H100-80GB", 81920), "": GpuType("T4", 16384)}
    with pytest.raises(InvalidSpec, match=r"gpu_types\.h100"):
        parse_gpu_types({"h100": "H100"})                # no memory
    with pytest.raises(InvalidSpec, match=r"gpu_types\.a100"):
        parse_gpu_types({"a100": 40})
    with pytest.raises(InvalidSpec, match="gpu_types"):
        parse_gpu_types(["h100"])


@pytest.mark.parametrize("milli, per_gpu, shards", [
    (250, 4, 1), (500, 4, 2), (300, 4, 2), (1000, 4, 4), (1, 4, 1), (250, 10, 3), (100, 10, 1),
])
def test_a_fraction_takes_its_shards_rounded_up(milli, per_gpu, shards):
    # 300 milli of a GPU cut in 4: 1.2 shards -> 2; 250 of 10: 2.5 -> 3
    assert shards_for(milli, per_gpu) == shards


def test_shares_of_several_gres_items_on_one_gpu_add_up():
    report = node_report(slurm_node(), GPU_TYPES)
    alloc = NodeAllocation("n1", 1, 0, (Gres("gpu", None, 1, (3,)), Gres("shard", None, 2, (1,)),
                                        Gres("shard", None, 1, (1,))))
    assert allocated_devices(alloc, report) == (DeviceShare(1, 750, 61440),
                                                DeviceShare(3, 1000, 81920))


def test_fractional_jobs_are_refused_with_what_to_configure_where_no_node_has_shards():
    assert fractional_refusal(captured().reports) is None
    plain = [node_report(slurm_node(gres=[Gres("gpu", "h100", 4)]), GPU_TYPES)]
    refusal = fractional_refusal(plain)
    assert "shard" in refusal and "GresTypes" in refusal and "gres.conf" in refusal
    drained = [node_report(replace(slurm_node(), flags=frozenset({"DRAIN"})), GPU_TYPES)]
    assert fractional_refusal(drained) is not None


def test_as_core_nodes_slurms_reason_is_the_problem_and_foreign_jobs_hold_their_gpus():
    nodes = {n.name: n for n in captured().core_nodes()}
    # schedulable stays the operator's (True): Slurm's state is the node's problem
    assert all(n.schedulable for n in nodes.values())
    assert (nodes["node3"].problem, nodes["node1"].problem) == ("down in Slurm: bad gpu", "")
    [held] = nodes["node1"].foreign
    assert held.holder == "slurm job 8 (root)"
    assert [(d.index, d.milli) for d in held.devices] == [(0, 1000), (1, 1000)]
    assert (held.cpu_milli, held.memory_mib) == (4000, 4000)
    assert nodes["node2"].foreign[0].devices == (DeviceShare(0, 250, 20480),)


def test_a_node_a_reservation_closes_is_unschedulable_with_both_reasons():
    inv = inventory(parse_sinfo(data("sinfo.json")), (), GPU_TYPES,
                    blocked={"node1": "in Slurm reservation m until 2026-01-01 10:00 UTC",
                             "node4": "in Slurm reservation n until 2026-01-01 11:00 UTC"})
    assert inv.reasons["node1"] == "in Slurm reservation m until 2026-01-01 10:00 UTC"
    assert inv.reasons["node4"] == ("drained in Slurm: disk full; in Slurm reservation n "
                                    "until 2026-01-01 11:00 UTC")
    assert inv.report("node1").node.problem == inv.reasons["node1"]


def test_the_attempts_of_another_rota_on_the_cluster_are_foreign():
    # job 10 is rota-7-1 with the comment rota:7: another control plane's, seen from "abc"
    nodes, jobs = parse_sinfo(data("sinfo.json")), parse_squeue(data("squeue.json"))
    ours = inventory(nodes, jobs, GPU_TYPES, instance="")
    theirs = inventory(nodes, jobs, GPU_TYPES, instance="abc")
    assert 10 not in {f.slurm_job for f in ours.foreign}
    assert 10 in {f.slurm_job for f in theirs.foreign}


def test_only_a_node_with_shards_can_share_a_gpu_and_every_node_takes_signals():
    shared = node_report(slurm_node(gres=[Gres("gpu", "h100", 2), Gres("shard", None, 8)]),
                         GPU_TYPES)
    whole = node_report(slurm_node(gres=[Gres("gpu", "h100", 2)]), GPU_TYPES)
    assert shared.node.features == frozenset({"gpu-sharing", "signals"})
    assert whole.node.features == frozenset({"signals"})
