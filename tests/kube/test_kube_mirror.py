"""Work started directly on Kubernetes is in rota's inventory at once: ``rota up --backend
kubernetes`` with node readings five minutes apart still shows the GPUs of a Pod that another
scheduler bound as held, and free again once the Pod is gone, as soon as the Pod informer sees
it (``KubeBackend`` wakes the loop with ``inventory=True``)."""

from __future__ import annotations

import functools

from rota.backends.kube.api import pods_path
from test_kube_e2e import kubectl_pod
from waiting import poll

wait = functools.partial(poll, timeout=60.0, every=0.2)  # readings are 300 s apart


def held_on(server, node: str) -> list[int]:
    found = [n for n in server.json("nodes") if n["name"] == node]
    return [f["gpus"] for n in found for f in n["foreign"]]


def test_a_pod_of_another_scheduler_is_in_the_inventory_as_soon_as_it_is_bound(cluster, up):
    node = cluster.add_node("mirror", gpus=4)
    server = up("--inventory-interval", "300")
    wait(lambda: any(n["name"] == node for n in server.json("nodes")), "the node")
    assert held_on(server, node) == []
    path = pods_path(cluster.namespace)
    cluster.api.create(path, kubectl_pod("direct", 3, scheduler="default-scheduler", node=node))
    wait(lambda: held_on(server, node) == [3], "rota to see the Pod's GPUs held")
    cluster.api.delete(f"{path}/direct", grace_s=0)
    wait(lambda: held_on(server, node) == [], "rota to see them free again")
