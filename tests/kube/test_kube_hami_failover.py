"""A HAMi node whose device plugin does not serve it (HAMi's registration outlived the plugin):
the node lock a bind takes there is never released, so every later bind of a GPU there could
only wait for it and fail. Once the lock outlives ``--kube-lock-wait``, rota offers none of
that node's GPUs, and a fractional job goes to the node whose plugin serves it, at its first
launch; the job running on the unserved node goes on."""

from __future__ import annotations

import functools
from datetime import datetime, timezone

from kubekit import HamiPlugin
from rota.backends.kube import hami, lock
from rota.backends.kube.api import NODES
from upkit import KubeServer
from waiting import poll

wait = functools.partial(poll, timeout=90, every=0.2)
T0 = datetime(2026, 8, 1, 6, 0, 0, tzinfo=timezone.utc)


def test_a_lock_is_stuck_once_held_longer_than_the_wait_until_it_expires():
    held = hami.node_lock_value(T0, "ns", "p")
    at = T0.timestamp()
    assert lock.stuck(held, at + 60, after_s=60) is None      # a bind may still wait for it
    assert lock.stuck(held, at + 61, after_s=60) == ("ns", "p", at)
    assert lock.stuck(held, at + 300, after_s=60) == ("ns", "p", at)
    assert lock.stuck(held, at + 301, after_s=60) is None     # expired: a bind takes it over
    assert lock.stuck("", at + 61, after_s=60) is None
    assert lock.stuck("yesterday", at + 61, after_s=60) is None  # malformed: taken over


def job_state(server: KubeServer, job_id: str, *states: str) -> dict | None:
    job = server.json("show", job_id)
    return job if job["state"] in states else None


def half(name: str, gpu: float, memory: str) -> str:
    return f"""
name: {name}
project: default
queue: default
image: busybox
entrypoint: train
resources: {{gpu: {gpu}, gpu_memory: {memory}, cpu: 1, memory: 2Gi}}
selector: {{rota.dev/gpu-sharing: hami}}
"""


def gpus_of(server: KubeServer, node: str) -> list[dict]:
    return next(n["gpus"] for n in server.json("nodes") if n["name"] == node)


def test_a_fraction_fails_over_to_the_node_whose_hami_plugin_serves_it(cluster, up):
    unserved = cluster.add_node("unserved", hami_gpus=1)
    server = up("--kube-lock-wait", "2")
    first = server.submit_file("first", half("first", 0.5, "20Gi"))
    running = wait(lambda: job_state(server, first, "running"), "the first job to run")
    assert running["placement"][0]["node"] == unserved
    name = f"rota-{first}-{running['attempts']}-0"
    held = cluster.api.get(f"{NODES}/{unserved}")["metadata"]["annotations"][hami.NODE_LOCK]
    assert held.endswith(f",{cluster.namespace},{name}")  # nobody releases it

    served = cluster.add_node("served", hami_gpus=1)
    with HamiPlugin(cluster.api, {served}) as plugin:
        # the lock outlives --kube-lock-wait: the unserved node's GPU is offered no more
        (gpu,) = wait(lambda: [g for g in gpus_of(server, unserved) if not g["healthy"]],
                      "the unserved node's GPU to be withheld")
        assert f"node lock it was given for Pod {cluster.namespace}/{name}" in gpu["problem"]
        # binpack would put a quarter on the half-used GPU of the unserved node; it goes to
        # the served one, at its first launch, and HAMi's plugin there gives it its devices
        second = server.submit_file("second", half("second", 0.25, "10Gi"))
        placed = wait(lambda: job_state(server, second, "running"), "the second job to run")
        assert placed["placement"][0]["node"] == served
        assert (placed["attempts"], placed["failures"]) == (0, 0)
        wait(lambda: plugin.served, "the device plugin to serve the second job's Pod")
    assert job_state(server, first, "running")  # the job on the unserved node goes on
