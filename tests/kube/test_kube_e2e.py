"""``rota up --backend kubernetes`` against the real API server, used as a new user would, from
the ``rota`` command: the nodes and their GPUs shown; a one-GPU job, a two-Pod gang and a
half-GPU job on a HAMi node bound where rota's plan says, with HAMi's annotations as HAMi
writes them, and still running after the control plane is killed and started again; a Pod
written as kubectl YAML with ``schedulerName: rota`` queued under its quota; a Pod of another
scheduler holding GPUs that rota places around; a preemption that deletes the victim's Pod
with its grace period; a drained node whose job is requeued and runs elsewhere."""

from __future__ import annotations

import functools

from kubekit import HamiPlugin, watch_deletion
from rota.backends.kube.api import NODES, pods_path
from upkit import KubeServer
from waiting import poll

wait = functools.partial(poll, timeout=90, every=0.2)


def job_state(server: KubeServer, job_id: str, *states: str):
    job = server.json("show", job_id)
    return job if job["state"] in states else None


def the_pod(cluster, job: dict, rank: int = 0) -> dict:
    name = f"rota-{job['id']}-{job['attempts']}-{rank}"
    return cluster.api.get(f"{pods_path(cluster.namespace)}/{name}")


def test_a_new_user_runs_a_job_a_gang_and_half_a_gpu_where_rotas_plan_says(cluster, up):
    plain = cluster.add_node("plain", gpus=4)
    shared = cluster.add_node("hami", hami_gpus=4)  # whatever the first two take, one is left
    with HamiPlugin(cluster.api, {shared}):
        server = up()
        nodes = {n["name"]: len(n["gpus"]) for n in server.json("nodes")}
        assert nodes == {plain: 4, shared: 4}
        assert plain in server.ok("nodes") and shared in server.ok("nodes")

        one = server.json("run", "--gpus", "1", "--", "nvidia-smi")["id"]
        gang = server.submit_file("gang", GANG)
        half = server.submit_file("half", HALF)
        jobs = {j: wait(lambda j=j: job_state(server, j, "running"), f"job {j} to run")
                for j in (one, gang, half)}
        for job in jobs.values():  # every Pod on the node of rota's plan
            for rank, replica in enumerate(job["placement"]):
                assert the_pod(cluster, job, rank)["spec"]["nodeName"] == replica["node"]
        (replica,) = jobs[half]["placement"]
        assert replica["node"] == shared
        device = replica["devices"][0]
        annotations = the_pod(cluster, jobs[half])["metadata"]["annotations"]
        # 20Gi of the device and half its cores, as HAMi's scheduler writes a Pod's devices
        assert annotations["hami.io/vgpu-devices-allocated"] == (
            f"GPU-{shared}-{device['index']},NVIDIA,20480,50:;")
        assert annotations["hami.io/vgpu-node"] == shared

        uid = the_pod(cluster, jobs[one])["metadata"]["uid"]
        server.kill9()
        server.start()
        wait(lambda: len(server.json("ps")) == 3, "the three jobs adopted")
        assert job_state(server, one, "running")
        assert the_pod(cluster, jobs[one])["metadata"]["uid"] == uid


GANG = """
name: ddp
project: default
queue: default
replicas: 2
image: pytorch/pytorch:2.3.0
entrypoint: torchrun --nnodes 2 --node_rank "$ROTA_REPLICA_RANK" train.py
resources: {gpu: 1, cpu: 2, memory: 8Gi}
"""

HALF = """
name: notebook
project: default
queue: default
kind: interactive
image: jupyter/base-notebook
entrypoint: ["start-notebook.sh"]
resources: {gpu: 0.5, gpu_memory: 20Gi, cpu: 1, memory: 4Gi}
selector: {rota.dev/gpu-sharing: hami}
"""


def kubectl_pod(name: str, gpus: int, labels: dict | None = None, scheduler: str = "rota",
                node: str | None = None) -> dict:
    """What ``kubectl apply -f pod.yaml`` sends."""
    spec = {"schedulerName": scheduler, "containers": [{
        "name": "train", "image": "pytorch/pytorch:2.3.0", "command": ["python", "train.py"],
        "resources": {"limits": {"nvidia.com/gpu": str(gpus)},
                      "requests": {"cpu": "1", "memory": "2Gi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def research_queue(server: KubeServer, cluster) -> str:
    """Project = the test namespace, and queue ``research`` with a quota of one GPU; the
    namespace."""
    server.ok("project", "create", cluster.namespace)
    queues = server.root / "queues.yaml"
    queues.write_text("queues:\n  - name: research\n    quota:\n      any: {nominal: {gpu: 1}}\n")
    server.ok("queue", "apply", str(queues))
    return cluster.namespace


def test_a_kubectl_pod_for_rota_waits_in_its_queue_under_its_quota(cluster, up):
    cluster.add_node("plain", gpus=4)
    server = up()
    ns = research_queue(server, cluster)
    for name in ("first", "second"):
        cluster.api.create(pods_path(ns), kubectl_pod(name, 1, {"rota.dev/queue": "research"}))
    jobs = wait(lambda: j if len(j := [x for x in server.json("ps", "-A")
                                       if x["project"] == ns]) == 2 else None,
                "both Pods to become jobs")
    running = wait(lambda: next((j for j in server.json("ps", "-A") if j["project"] == ns
                                 and j["state"] == "running"), None), "one of them to run")
    waiting = next(j for j in jobs if j["id"] != running["id"])
    held = wait(lambda: (w := server.json("show", waiting["id"]))["wait_reasons"] and w,
                "the other to say why it waits")
    assert held["state"] == "pending" and held["wait_reasons"][0]["code"] == "quota"
    pods = {p["metadata"]["name"]: p for p in cluster.api.list(pods_path(ns)).items}
    assert sorted(bool(p["spec"].get("nodeName")) for p in pods.values()) == [False, True]
    server.ok("cancel", running["id"])
    wait(lambda: job_state(server, waiting["id"], "running"), "the second to run in its turn")


def test_a_kubectl_pod_deleted_or_evicted_ends_its_job_instead_of_being_placed_again(
        cluster, up):
    cluster.add_node("a", gpus=1)
    cluster.add_node("b", gpus=1)
    server = up()
    ns = research_queue(server, cluster)
    for name in ("first", "second"):
        cluster.api.create(pods_path(ns), kubectl_pod(name, 1, {"rota.dev/queue": "research"}))
    running = wait(lambda: next((j for j in server.json("ps", "-A") if j["project"] == ns
                                 and j["state"] == "running"), None), "one of them to run")
    waiting = wait(lambda: next((j for j in server.json("ps", "-A") if j["project"] == ns
                                 and j["state"] == "pending"), None), "the other to wait")
    # the owner deletes the waiting Pod (kubectl delete pod): its job must not keep its place
    cluster.api.delete(f"{pods_path(ns)}/{waiting['name']}", grace_s=0)
    gone = wait(lambda: job_state(server, waiting["id"], "cancelled"), "its job to be cancelled")
    assert "no longer waits for rota" in gone["reason"]

    # kubectl drain evicts the running Pod: a bare Pod does not come back, so its job ends
    # instead of being placed on the other node, where its launch could only fail
    drained = server.json("show", running["id"])["placement"][0]["node"]
    cluster.api.merge_patch(f"{NODES}/{drained}", {"spec": {"unschedulable": True}})
    cluster.api.create(f"{pods_path(ns)}/{running['name']}/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": running["name"], "namespace": ns}})
    ended = wait(lambda: job_state(server, running["id"], "cancelled", "failed"),
                 "the evicted Pod's job to end")
    assert ended["state"] == "cancelled" and "no longer waits for rota" in ended["reason"]
    assert len(ended["history"]) == 1  # never bound again


def test_rota_places_around_the_gpus_a_pod_of_another_scheduler_holds(cluster, up):
    node = cluster.add_node("plain", gpus=4)
    cluster.api.create(pods_path(cluster.namespace),
                       kubectl_pod("serving", 3, scheduler="default-scheduler", node=node))
    server = up()
    wait(lambda: [f["gpus"] for n in server.json("nodes") for f in n["foreign"]] == [3],
         "the other scheduler's Pod to show on the node")
    big = server.json("run", "--gpus", "2", "--", "train")["id"]
    small = server.json("run", "--gpus", "1", "--", "train")["id"]
    placed = wait(lambda: job_state(server, small, "running"), "the one-GPU job to run")
    assert [d["index"] for d in placed["placement"][0]["devices"]] == [0]  # the free one
    waiting = wait(lambda: (w := server.json("show", big))["wait_reasons"] and w,
                   "the two-GPU job to say why it waits")
    assert waiting["state"] == "pending" and waiting["wait_reasons"][0]["resource"] == "gpu"


VICTIM = """
name: victim
project: default
queue: default
priority: 0
image: busybox
entrypoint: train
checkpoint: {grace: 45s}
resources: {gpu: 2}
"""

URGENT = VICTIM.replace("victim", "urgent").replace("priority: 0", "priority: 100")


def test_preemption_deletes_the_victims_pod_with_its_grace_period(cluster, up):
    cluster.add_node("plain", gpus=2)
    server = up()
    victim = server.submit_file("victim", VICTIM)
    running = wait(lambda: job_state(server, victim, "running"), "the victim to run")
    pod = the_pod(cluster, running)
    grace = watch_deletion(cluster, pod["metadata"]["name"],
                           lambda: server.submit_file("urgent", URGENT), timeout_s=80)
    assert grace == 45
    wait(lambda: job_state(server, victim, "pending"), "the victim to be requeued")
    urgent = next(j for j in server.json("ps") if j["name"] == "urgent")
    wait(lambda: job_state(server, urgent["id"], "running"), "the urgent job to run")


RETRIED = """
name: retried
project: default
queue: default
image: busybox
entrypoint: train
restart: {max_retries: 2}
resources: {gpu: 2}
"""


def test_the_job_of_a_drained_node_is_requeued_and_runs_elsewhere(cluster, up):
    a, b = cluster.add_node("a", gpus=2), cluster.add_node("b", gpus=2)
    server = up()
    job_id = server.submit_file("retried", RETRIED)
    first = wait(lambda: job_state(server, job_id, "running"), "the job to run")
    drained = first["placement"][0]["node"]
    pod = the_pod(cluster, first)
    wait(lambda: pod_running(cluster, pod["metadata"]["name"]), "kwok to run its Pod")
    # kubectl drain: cordon, then evict every Pod through the Eviction API
    cluster.api.merge_patch(f"{NODES}/{drained}", {"spec": {"unschedulable": True}})
    cluster.api.create(f"{pods_path(cluster.namespace)}/{pod['metadata']['name']}/eviction", {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": pod["metadata"]["name"], "namespace": cluster.namespace}})
    again = wait(lambda: (j := job_state(server, job_id, "running")) and j["attempts"] == 1
                 and j, "the job to run again")
    assert again["placement"][0]["node"] == ({a, b} - {drained}).pop()
    events = server.ok("show", job_id)
    assert "evicted" in events


def pod_running(cluster, name: str) -> bool:
    pod = cluster.api.get(f"{pods_path(cluster.namespace)}/{name}")
    return pod["status"].get("phase") == "Running"
