"""Node objects become rota's ``Node``: resources, GPUs at device grain (HAMi) or node grain
(GPU Feature Discovery), schedulability with Kubernetes' reason, the resource group."""

from dataclasses import replace

import pytest

from kubekit import A100, A100_MIB, hami_devices, node_object
from rota.backends.kube import hami
from rota.backends.kube.nodes import Grain, NodeProblem, Problem, node_from_kube
from rota.core import DEFAULT_GROUP, GpuDevice, InvalidSpec
from rota.core.nodes import model_matches


def test_cpu_memory_and_whole_gpus_from_allocatable_and_gfd_labels():
    kube = node_from_kube(node_object(cpu="63500m", memory="515396075520", gpus=8))
    node = kube.node
    # 63500m -> 63,500 milli-cores; 515,396,075,520 bytes = 491,520 MiB exactly
    assert (node.name, node.cpu_milli, node.memory_mib) == ("gpu-1", 63_500, 491_520)
    assert kube.grain is Grain.NODE and kube.gpu_allocatable == 8
    assert node.devices == tuple(GpuDevice(index=i, model=A100, memory_mib=A100_MIB)
                                 for i in range(8))
    assert node.schedulable and kube.problems == () and kube.gpu_problems == ()


def test_allocatable_wins_over_capacity_and_capacity_fills_what_is_missing():
    obj = node_object(cpu="64", memory="512Gi")
    obj["status"]["allocatable"] = {"cpu": "62", "nvidia.com/gpu": "7"}  # no memory there
    kube = node_from_kube(obj)
    assert (kube.node.cpu_milli, kube.node.memory_mib, kube.gpu_allocatable) == (
        62_000, 512 * 1024, 7)


def test_memory_rounds_down_to_whole_mib_and_cpu_rounds_up_to_a_milli_core():
    # 1Gi + 1 byte is still 1024 MiB; 0.0001 cores is a milli-core, as MilliValue() says
    kube = node_from_kube(node_object(cpu="0.0001", memory=str(2**30 + 1)))
    assert (kube.node.cpu_milli, kube.node.memory_mib) == (1, 1024)


def test_a_hami_node_offers_each_registered_device():
    devices = hami_devices(4)
    kube = node_from_kube(node_object(gpus=40, hami_register=hami.encode_node_devices(devices)))
    assert kube.grain is Grain.DEVICE
    assert kube.gpu_allocatable == 40  # vGPU slots: 4 devices x 10
    assert kube.node.devices == tuple(
        GpuDevice(index=i, model="NVIDIA-A100-SXM4-80GB", memory_mib=A100_MIB,
                  uuid=f"GPU-a100-{i}", numa=i // 4) for i in range(4))
    assert kube.hami_devices == tuple(devices)  # HAMi's own spelling kept for its annotations


@pytest.mark.parametrize("hami_type, gfd_product", [
    ("NVIDIA-NVIDIA A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"),  # what HAMi's plugin writes
    ("NVIDIA-Tesla P4", "Tesla-P4"),
    ("NVIDIA-NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"),  # without the vendor prefix
])
def test_a_gpu_has_one_model_name_on_hami_and_gfd_nodes(hami_type, gfd_product):
    register = hami.encode_node_devices(hami_devices(1, model=hami_type))
    on_hami = node_from_kube(node_object(gpus=10, hami_register=register))
    on_gfd = node_from_kube(node_object(gpus=1, labels={
        "nvidia.com/gpu.product": gfd_product, "nvidia.com/gpu.memory": str(A100_MIB)}))
    assert on_hami.node.devices[0].model == on_gfd.node.devices[0].model == gfd_product
    # so that a job's model pattern picks both or neither
    for patterns in ((gfd_product,), ("*" + gfd_product.split("-")[-1] + "*",), ("*V100*",)):
        assert model_matches(on_hami.node.devices[0].model, patterns) == model_matches(
            on_gfd.node.devices[0].model, patterns)


def test_unhealthy_and_cordoned_hami_devices_are_offered_as_unhealthy():
    devices = hami_devices(3)
    devices[0] = replace(devices[0], health=False)
    register = hami.encode_node_devices(devices)
    kube = node_from_kube(node_object(hami_register=register, annotations={
        hami.DEVICE_CORDON: "GPU-a100-2"}))
    assert [d.healthy for d in kube.node.devices] == [False, True, False]


def test_hami_indices_that_repeat_give_way_to_annotation_order():
    # HAMi's own test annotation leaves "index" out of both devices (Go's omitempty on 0)
    register = ('[{"id":"GPU-1","count":1,"devmem":8192,"devcore":100,"type":"NVIDIA-V100",'
                '"health":true},{"id":"GPU-0","count":1,"devmem":8192,"devcore":100,'
                '"type":"NVIDIA-V100","health":true}]')
    kube = node_from_kube(node_object(hami_register=register))
    assert [(d.index, d.uuid) for d in kube.node.devices] == [(0, "GPU-1"), (1, "GPU-0")]


def test_hami_devices_are_put_in_index_order():
    devices = list(reversed(hami_devices(3)))
    kube = node_from_kube(node_object(hami_register=hami.encode_node_devices(devices)))
    assert [d.uuid for d in kube.node.devices] == ["GPU-a100-0", "GPU-a100-1", "GPU-a100-2"]


@pytest.mark.parametrize("register, code, words", [
    ("not-valid-json", Problem.HAMI_UNREADABLE, "hami.io/node-nvidia-register: is not valid JSON"),
    ("[]", Problem.HAMI_NO_DEVICES, "HAMi registered no GPU"),
    ('[{"id":"GPU-0","count":7,"devmem":40960,"devcore":100,"type":"A100","health":true,'
     '"mode":"mig"}]', Problem.HAMI_NO_DEVICES, "only GPUs in MIG mode"),
    ('[{"id":"GPU-0","count":1,"devmem":0,"type":"A100","health":true}]',
     Problem.HAMI_UNREADABLE, "needs a positive devmem"),
])
def test_a_hami_annotation_without_usable_devices_offers_no_gpu_but_keeps_the_node(
        register, code, words):
    kube = node_from_kube(node_object(hami_register=register))
    assert kube.node.devices == () and kube.node.schedulable
    (problem,) = kube.gpu_problems
    assert problem.code is code and words in problem.detail


def test_gpus_without_gfd_labels_are_not_offered_and_the_reason_says_why():
    kube = node_from_kube(node_object(gpus=4, gfd=False))
    assert kube.node.devices == () and kube.gpu_allocatable == 4 and kube.node.schedulable
    (problem,) = kube.gpu_problems
    assert problem.code is Problem.GPUS_UNDESCRIBED
    assert "4 nvidia.com/gpu" in problem.detail and "nvidia.com/gpu.product" in problem.detail


def test_a_node_without_gpus_has_no_devices_and_no_gpu_problem():
    kube = node_from_kube(node_object(gpus=0, gfd=False))
    assert kube.node.devices == () and kube.gpu_problems == ()


@pytest.mark.parametrize("changes, problems", [
    ({"unschedulable": True},
     (NodeProblem(Problem.CORDONED, "spec.unschedulable is true"),)),
    ({"ready": "False", "ready_reason": "KubeletNotReady"},
     (NodeProblem(Problem.NOT_READY, "Ready is False (KubeletNotReady: kubelet says so)"),)),
    ({"ready": "Unknown", "ready_reason": "NodeStatusUnknown"},
     (NodeProblem(Problem.NOT_READY, "Ready is Unknown (NodeStatusUnknown: kubelet says so)"),)),
    ({"ready": None}, (NodeProblem(Problem.NOT_READY, "no Ready condition reported"),)),
    ({"unschedulable": True, "ready": "False"},
     (NodeProblem(Problem.CORDONED, "spec.unschedulable is true"),
      NodeProblem(Problem.NOT_READY, "Ready is False (KubeletReady: kubelet says so)"))),
], ids=["cordoned", "not-ready", "unknown", "no-condition", "both"])
def test_cordoned_and_not_ready_nodes_are_unschedulable_with_the_reason(changes, problems):
    kube = node_from_kube(node_object(**changes))
    assert not kube.node.schedulable
    assert kube.problems == problems


def test_the_resource_group_comes_from_a_label():
    assert node_from_kube(node_object()).node.resource_group == DEFAULT_GROUP
    kube = node_from_kube(node_object(labels={"rota.dev/resource-group": "train"}))
    assert kube.node.resource_group == "train"
    assert kube.node.labels["rota.dev/resource-group"] == "train"
    other = node_from_kube(node_object(labels={"pool": "infer"}), group_label="pool")
    assert other.node.resource_group == "infer"


def test_the_client_models_to_dict_form_reads_the_same():
    # the official client's to_dict(): snake_case keys (the same ones here) and None for absent
    obj = node_object()
    obj["metadata"]["annotations"] = None
    obj["spec"] = {"unschedulable": None, "taints": None}
    obj["status"]["conditions"][0]["last_heartbeat_time"] = None
    kube = node_from_kube(obj)
    assert kube.node.schedulable and len(kube.node.devices) == 8


@pytest.mark.parametrize("mutate, field", [
    (lambda o: o["status"]["allocatable"].update(cpu="lots"), "status.allocatable.cpu"),
    (lambda o: o["status"]["allocatable"].update(memory="-1Gi"), "status.allocatable.memory"),
    (lambda o: o["status"]["capacity"].update(cpu="x") or o["status"]["allocatable"].pop("cpu"),
     "status.capacity.cpu"),
    (lambda o: o["metadata"].pop("name"), "metadata.name"),
    (lambda o: o["metadata"]["labels"].update(zone=3), "metadata.labels.zone"),
    (lambda o: o.update(status=[]), "status"),
])
def test_a_malformed_node_is_refused_naming_the_field(mutate, field):
    obj = node_object()
    mutate(obj)
    with pytest.raises(InvalidSpec) as err:
        node_from_kube(obj)
    assert err.value.field == field


def test_only_a_hami_node_with_devices_can_share_a_gpu_and_no_node_takes_signals():
    hami_node = node_from_kube(node_object(hami_register=hami.encode_node_devices(
        hami_devices(2)))).node
    plain = node_from_kube(node_object(gpus=8)).node
    empty_hami = node_from_kube(node_object(hami_register="[]")).node
    assert hami_node.features == frozenset({"containers", "gpu-sharing", "gpu-memory-limit",
                                            "gpu-compute-limit"})
    assert plain.features == empty_hami.features == frozenset({"containers"})
