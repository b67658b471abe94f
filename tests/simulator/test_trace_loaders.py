"""Loaders of the Alibaba node and pod lists: both pod layouts, and bad rows named by file,
line and column."""

from __future__ import annotations

import pytest

from rota.simulator.alibaba import TraceError, load_nodes, load_pods, to_nodes

NODES = """sn,cpu_milli,memory_mib,gpu,model
openb-node-0000,64000,262144,2,P100
openb-node-0001,96000,393216,8,G2
openb-node-0227,32000,262144,0,nan
"""
PODS_11 = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0
openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061
openb-pod-0035,16000,32768,1,1000,V100M16|V100M32,LS,Running,9967058,9968575,9967063
openb-pod-0040,4000,8192,0,0,,BE,Pending,10,,
"""
PODS_5 = """name,cpu_milli,memory_mib,num_gpu,gpu_milli
openb-pod-0000,12000,16384,8,1000
openb-pod-0001,6000,12288,1,460
"""


def write(tmp_path, text, name="f.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_nodes_load_with_cpu_only_nodes_kept_without_model(tmp_path):
    nodes = load_nodes(write(tmp_path, NODES))
    assert [(n.name, n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in nodes] == [
        ("openb-node-0000", 64000, 262144, 2, "P100"),
        ("openb-node-0001", 96000, 393216, 8, "G2"),
        ("openb-node-0227", 32000, 262144, 0, "")]
    core = to_nodes(nodes)
    assert [len(n.devices) for n in core] == [2, 8, 0]
    assert {d.model for d in core[1].devices} == {"G2"}


def test_pods_load_in_the_eleven_column_layout(tmp_path):
    pods = load_pods(write(tmp_path, PODS_11))
    assert [(p.name, p.num_gpu, p.gpu_milli, p.gpu_spec, p.gpu_total) for p in pods] == [
        ("openb-pod-0000", 1, 1000, (), 1000),
        ("openb-pod-0001", 1, 460, (), 460),
        ("openb-pod-0035", 1, 1000, ("V100M16", "V100M32"), 1000),
        ("openb-pod-0040", 0, 0, (), 0)]


def test_pods_load_in_the_five_column_layout(tmp_path):
    pods = load_pods(write(tmp_path, PODS_5))
    assert [(p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.gpu_spec) for p in pods] == [
        (12000, 16384, 8, 1000, ()), (6000, 12288, 1, 460, ())]
    assert [p.lifetime for p in pods] == [None, None]


def test_pod_lifetimes_are_deletion_minus_creation_and_none_when_a_time_is_empty(tmp_path):
    pods = load_pods(write(tmp_path, PODS_11))
    # 12537496 - 0; 12902960 - 427061; 9968575 - 9967058; no deletion_time
    assert [p.lifetime for p in pods] == [12537496, 12475899, 1517, None]
    assert (pods[3].created, pods[3].deleted) == (10, None)


def test_a_pod_deleted_before_it_was_created_is_named(tmp_path):
    text = PODS_11.splitlines()[0] + "\np,1000,10,1,500,,LS,Running,100,99,100\n"
    with pytest.raises(TraceError) as err:
        load_pods(write(tmp_path, text))
    assert err.value.field == "line 2.deletion_time"
    assert "before the creation_time 100" in err.value.reason


HEAD = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"


@pytest.mark.parametrize("text, field, reason", [
    (HEAD + "p,1000,10,1,500\np,x,10,1,500\n", "line 3.cpu_milli", "expected an integer, got 'x'"),
    (HEAD + "p,1000,10,1,1500\n", "line 2.gpu_milli", "must be in 0..1000, got 1500"),
    (HEAD + "p,1000,10,2,500\n", "line 2.gpu_milli", "a share below 1000 is for one GPU"),
    (HEAD + "p,1000,10,2,0\n", "line 2.gpu_milli", "needs a share in 1..1000"),
    (HEAD + "p,-5,10,0,0\n", "line 2.cpu_milli", "must be in 0.."),
    (HEAD + ",1000,10,0,0\n", "line 2.name", "must not be empty"),
    (HEAD + "p,1000,1.5,0,0\n", "line 2.memory_mib", "expected an integer"),
    ("name,cpu_milli,memory_mib,num_gpu\np,1,1,1\n", "line 1.gpu_milli", "missing column"),
    (HEAD, "line 1", "no pods"),
], ids=["not-a-number", "share-too-big", "multi-gpu-share", "gpus-without-share", "negative",
        "no-name", "fraction", "missing-column", "empty"])
def test_bad_pod_rows_name_line_and_column(tmp_path, text, field, reason):
    path = write(tmp_path, text, "pods.csv")
    with pytest.raises(TraceError) as err:
        load_pods(path)
    assert err.value.field == field
    assert reason in err.value.reason
    assert str(err.value).startswith(f"{path}: {field}: ")


NODE_HEAD = "sn,cpu_milli,memory_mib,gpu,model\n"


@pytest.mark.parametrize("rows, field", [
    ("n1,64000,262144,2,\n", "line 2.model"),
    ("n1,64000,262144,two,P100\n", "line 2.gpu"),
    ("n0,1,1,0,\nn0,1,1,0,\n", "line 3.sn"),
], ids=["gpus-without-model", "gpu-not-a-number", "duplicate-name"])
def test_bad_node_rows_name_line_and_column(tmp_path, rows, field):
    with pytest.raises(TraceError) as err:
        load_nodes(write(tmp_path, NODE_HEAD + rows))
    assert err.value.field == field


def test_a_missing_file_is_a_trace_error(tmp_path):
    with pytest.raises(TraceError, match="cannot read"):
        load_nodes(tmp_path / "absent.csv")
