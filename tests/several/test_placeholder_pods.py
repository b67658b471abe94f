"""The placeholder Pod of a replica that runs through Slurm (``rota.backends.kube.holds``), on a
node at node grain and on a HAMi node: pure, no cluster."""

from __future__ import annotations

from builders import job
from kubekit import kwok_node
from rota.backends.holds import Held, ToHold
from rota.backends.kube import hami
from rota.backends.kube.holds import held, hold_pod
from rota.backends.kube.names import LABEL_RESOURCE_GROUP
from rota.backends.kube.nodes import node_from_kube
from rota.backends.kube.podinfo import pod_info


def _kube(**kwargs):
    return node_from_kube(kwok_node("node1", **kwargs), LABEL_RESOURCE_GROUP,
                          frozenset({"nvidia.com/gpu"}))


def test_at_node_grain_it_asks_the_gpus_as_the_extended_resource():
    body = hold_pod(job("7").gpus(2).build(), 3, "slurm", ToHold(1, "node1", (0, 2)), "rota",
                    ("nvidia.com/gpu",), _kube(gpus=4), 100.0)
    assert body["metadata"]["name"] == "rota-hold-7-3-1"
    assert body["spec"]["nodeName"] == "node1"
    assert body["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
    assert hami.ALLOCATED not in body["metadata"]["annotations"]
    body["metadata"]["uid"] = "u1"
    assert held(pod_info(body)) == Held("7", 3, 1, "node1", (0, 2), "slurm")


def test_on_a_hami_node_it_carries_a_finished_allocation_of_the_whole_devices():
    kube = _kube(hami_gpus=4)
    body = hold_pod(job("7").gpus(2).build(), 3, "slurm", ToHold(0, "node1", (1, 3)), "rota",
                    ("nvidia.com/gpu",), kube, 100.0)
    assert "resources" not in body["spec"]["containers"][0]  # HAMi counts slots, not devices
    annotations = body["metadata"]["annotations"]
    devices = [d for c in hami.decode_pod_devices(annotations[hami.ALLOCATED], hami.ALLOCATED)
               for d in c]
    uuids = {d.index: d.uuid for d in kube.node.devices}
    assert [(d.uuid, d.cores) for d in devices] == [(uuids[1], 100), (uuids[3], 100)]
    assert annotations[hami.BIND_PHASE] == hami.PHASE_SUCCESS
    assert annotations["rota.dev/devices"] == "1,3"


def test_a_pod_without_the_engine_label_is_no_hold():
    body = hold_pod(job("7").gpus(1).build(), 0, "slurm", ToHold(0, "node1", (0,)), "rota", ())
    body["metadata"]["uid"] = "u1"
    body["metadata"]["labels"].pop("rota.dev/hold-for")
    assert held(pod_info(body)) is None  # one of rota's own Pods, not a hold
