"""What the backend sees of the real cluster through its watches: Pods of other schedulers
held as used on their nodes, Pods users created for rota offered as jobs (each one waking the
control loop as work offered; refused ones told why on the Pod, as kube-scheduler does),
bound where rota places them, and a watch whose resource version is gone listed again."""

from __future__ import annotations

import functools

from rota.backends.base import OFFER_LABEL, LaunchSpec
from rota.backends.kube.api import KubeApi, KubeError, pods_path
from rota.backends.kube.informer import Informer
from rota.backends.kube.podinfo import pod_info
from rota.core import DeviceShare, Placement, ReplicaPlacement
from waiting import poll

wait = functools.partial(poll, timeout=60, every=0.1)
NO_SPEC = LaunchSpec(("true",), "")


def user_pod(name: str, *, scheduler: str = "rota", node: str | None = None, gpus: int = 1,
             labels: dict[str, str] | None = None) -> dict:
    """A Pod as a user writes it in YAML for kubectl apply."""
    spec: dict = {"schedulerName": scheduler, "containers": [{
        "name": "main", "image": "pytorch/pytorch:2.3.0", "command": ["python", "train.py"],
        "resources": {"requests": {"cpu": "2", "memory": "8Gi"},
                      "limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def test_pods_of_another_scheduler_hold_their_gpus_and_rota_sees_it(cluster):
    node = cluster.add_node("a")
    backend = cluster.backend()
    cluster.api.create(pods_path(cluster.namespace),
                       user_pod("serving", scheduler="default-scheduler", node=node, gpus=3))
    mine = wait(lambda: next((n for n in backend.inventory() if n.name == node and n.foreign),
                             None), "the Pod to be seen on its node")
    (held,) = mine.foreign
    assert [d.index for d in held.devices] == [5, 6, 7]
    assert (held.cpu_milli, held.memory_mib) == (2000, 8192)
    assert held.holder == f"pod {cluster.namespace}/serving (default-scheduler)"
    # rota's own Pods on the node are not foreign
    backend.launch(job_of(1), Placement((ReplicaPlacement(node, (DeviceShare(0, 1000, 81920),)),)),
                   NO_SPEC, attempt=0)
    wait(lambda: cluster.api.get(f"{pods_path(cluster.namespace)}/rota-900-0-0")["spec"]
         .get("nodeName"), "rota's Pod to be bound")
    assert len(next(n for n in backend.inventory() if n.name == node).foreign) == 1


def job_of(gpus: int):
    from rota.core import GpuRequest, Job, JobId, ReplicaRequest
    return Job(id=JobId("900"), project="p", queue="q",
               request=ReplicaRequest(1000, 1024, GpuRequest(gpus)))


def test_pods_created_for_rota_are_offered_and_bound_where_rota_places_them(cluster):
    node = cluster.add_node("a")
    backend = cluster.backend()
    api, ns = cluster.api, cluster.namespace
    api.create(pods_path(ns), user_pod("single", labels={"rota.dev/queue": "research"}))
    group = {"pod-group.scheduling.sigs.k8s.io/name": "ddp",
             "pod-group.scheduling.sigs.k8s.io/min-available": "2"}
    for rank in (0, 1):
        api.create(pods_path(ns), user_pod(f"ddp-{rank}", labels={"rota.dev/queue": "research",
                                                                  **group}))
    offers = wait(lambda: o if len(o := ours(backend, ns)) == 2 else None, "two offers")
    by_kind = {o.key.split(":")[0]: o for o in offers}
    assert by_kind["pod"].job.replicas == 1 and by_kind["group"].job.replicas == 2
    assert {o.job.project for o in offers} == {ns} and {o.job.user for o in offers} == {"alice"}

    gang = by_kind["group"]
    job = gang.job.__class__(**{**{f: getattr(gang.job, f) for f in gang.job.__slots__},
                                "id": "31", "labels": ((OFFER_LABEL, gang.key),)})
    devices = [(DeviceShare(i, 1000, 81920),) for i in (2, 3)]
    handle = backend.launch(job, Placement(tuple(ReplicaPlacement(node, d) for d in devices)),
                            NO_SPEC, attempt=0)
    assert [r.ref["name"] for r in handle.replicas] == ["ddp-0", "ddp-1"]
    for rank in (0, 1):
        assert api.get(f"{pods_path(ns)}/ddp-{rank}")["spec"]["nodeName"] == node
    wait(lambda: [o.key for o in ours(backend, ns)] == [by_kind["pod"].key],
         "the gang's offer to be gone once bound")


def test_a_pod_created_for_rota_wakes_the_loop_as_work_offered(cluster):
    backend = cluster.backend()
    wakes: list[bool] = []
    backend.watch(lambda arrived=False, inventory=False: wakes.append(arrived))
    try:
        cluster.api.create(pods_path(cluster.namespace),
                           user_pod("fresh", labels={"rota.dev/queue": "research"}))
        wait(lambda: True in wakes, "the Pod to wake the loop as work offered")
        # a Pod of another scheduler is no work offered to rota
        cluster.api.create(pods_path(cluster.namespace),
                           user_pod("theirs", scheduler="default-scheduler"))
        wait(lambda: backend.pods.get(f"{cluster.namespace}/theirs"), "the other Pod")
        assert wakes.count(True) == 1
    finally:
        backend.unwatch()


def ours(backend, namespace: str):
    """The offers of this test's namespace (other tests may share the cluster)."""
    return [o for o in backend.offers() if o.job.project == namespace]


def test_a_pod_that_cannot_be_a_job_is_told_why_on_its_pod_scheduled_condition(cluster):
    cluster.add_node("a")
    backend = cluster.backend()
    cluster.api.create(pods_path(cluster.namespace), user_pod("no-queue"))
    wait(lambda: ours(backend, cluster.namespace) == [] and
         backend.pods.get(f"{cluster.namespace}/no-queue"), "the Pod to be seen")

    def condition():
        ours(backend, cluster.namespace)  # rota looks at its offers again, as every pass does
        obj = cluster.api.get(f"{pods_path(cluster.namespace)}/no-queue")
        return next((c for c in obj["status"].get("conditions") or []
                     if c["type"] == "PodScheduled"), None)
    found = wait(condition, "the PodScheduled condition")
    assert found["status"] == "False" and found["reason"] == "Unschedulable"
    assert "rota.dev/queue" in found["message"] and found["message"].startswith("rota: ")


class GoneOnce(KubeApi):
    """The real API, except that its first watch answers 410 Gone, as after a compaction."""

    def __init__(self, client) -> None:
        super().__init__(client)
        self.watches = 0

    def watch(self, *args, **kwargs):
        self.watches += 1
        if self.watches == 1:
            raise KubeError(410, "Expired", "too old resource version")
        return super().watch(*args, **kwargs)


def test_an_informer_lists_again_when_its_version_is_gone(kube_api, namespace):
    api = GoneOnce(kube_api)
    seen: list[tuple[str, bool]] = []
    informer = Informer(api, pods_path(namespace), pod_info,
                        lambda key, old, new: seen.append((key, new is None)))
    informer.start()
    try:
        wait(lambda: informer.lists == 2 and api.watches >= 2, "a second list and a watch")
        api.create(pods_path(namespace), user_pod("after", scheduler="other"))
        wait(lambda: informer.get(f"{namespace}/after"), "the new Pod in the cache")
        assert (f"{namespace}/after", False) in seen
    finally:
        informer.stop()
