"""Node features on Kubernetes, from the ``rota`` command against the real API server: a GPU
share goes to the node where HAMi runs, never to a node without it, with no selector asked;
a share no node can take is refused at submit; a checkpoint signal other than SIGTERM is
delivered as ``docs/kubernetes.md`` says: the Pod is deleted with the job's grace period
(SIGTERM, then SIGKILL), and the control plane's log says so."""

from __future__ import annotations

import functools

from kubekit import HamiPlugin, watch_deletion
from upkit import KubeServer
from waiting import poll

wait = functools.partial(poll, timeout=90, every=0.2)


def settled(server: KubeServer, job_id: str, *states: str):
    job = server.json("show", job_id)
    return job if job["state"] in states else None


SHARE = """
name: notebook
project: default
queue: default
image: jupyter/base-notebook
entrypoint: ["start-notebook.sh"]
resources: {gpu: 0.5, gpu_memory: 20Gi, cpu: 1, memory: 4Gi}
"""


def test_a_gpu_share_runs_on_the_hami_node_not_on_the_emptier_one_without_it(cluster, up):
    # "a" comes first, and with fewer free GPUs packing would fill it first: only its
    # features keep the share off it
    plain = cluster.add_node("a", gpus=1)
    shared = cluster.add_node("b", hami_gpus=4)
    with HamiPlugin(cluster.api, {shared}):
        server = up()
        features = {n["name"]: n["features"] for n in server.json("nodes")}
        assert features == {plain: ["containers"], shared: [
            "containers", "gpu-compute-limit", "gpu-memory-limit", "gpu-sharing"]}
        share = server.submit_file("share", SHARE)
        job = wait(lambda: settled(server, share, "running", "failed"), "the share to run")
        assert job["state"] == "running" and job["attempts"] == 0  # its first attempt
        (replica,) = job["placement"]
        assert replica["node"] == shared != plain


def test_a_gpu_share_is_refused_at_submit_where_no_node_runs_hami(cluster, up):
    cluster.add_node("a", gpus=4)
    server = up()
    wait(lambda: server.json("nodes"), "the node to be reported")  # none yet: nothing refused
    path = server.root / "share.yaml"
    path.write_text(SHARE)
    refused = server.rota("submit", str(path))
    assert refused.returncode != 0
    assert "resources.gpu" in refused.stderr
    assert "0.5 GPU shares need a node that can share a GPU" in refused.stderr
    assert server.json("ps") == []


VICTIM = """
name: victim
project: default
queue: default
priority: 0
image: busybox
entrypoint: train
checkpoint: {signal: SIGUSR1, grace: 45s}
resources: {gpu: 2}
"""

URGENT = VICTIM.replace("victim", "urgent").replace("priority: 0", "priority: 100")


def test_a_checkpoint_signal_kubernetes_cannot_send_is_sigterm_with_the_grace_period(
        cluster, up):
    cluster.add_node("a", gpus=2)
    server = up()
    victim = server.submit_file("victim", VICTIM)  # placed although the node has no signals
    running = wait(lambda: settled(server, victim, "running"), "the victim to run")
    name = f"rota-{running['id']}-{running['attempts']}-0"
    grace = watch_deletion(cluster, name, lambda: server.submit_file("urgent", URGENT),
                           timeout_s=80)
    assert grace == 45  # SIGTERM now, SIGKILL 45 s later: the time to save a checkpoint
    assert f"job {victim} asked for SIGUSR1" in server.output()
    assert "get SIGTERM and their grace period" in server.output()
    wait(lambda: settled(server, victim, "pending"), "the victim to be requeued")
