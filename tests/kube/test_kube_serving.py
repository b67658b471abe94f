"""Serving on the Kubernetes backend, on kwok (whose Pods never run a process): a service's
replica becomes a Pod that rota binds, with ``ROTA_PORT`` and the ``rota.dev/port`` annotation,
and rota reaches it at the Pod's IP and that port (``Backend.endpoint``). Nothing listens there
on kwok, so the request waits, then gets 503 with Retry-After saying the replica runs but is not
ready; with a real kubelet the gateway would pass the answer on, as on the other backends
(tests/e2e/test_serving.py, tests/slurm/test_slurm_serving.py)."""

from __future__ import annotations

import pytest

from rota.backends.kube.api import pods_path
from upkit import KubeServer
from waiting import poll

openai = pytest.importorskip("openai", reason="the official openai client is a test dependency")

SERVICE = """\
name: tiny
kind: service
entrypoint: python bigram_lm.py --model tiny
resources: {cpu: 100m, memory: 64Mi, gpu: 1}
service:
  models: [tiny]
  replicas: {min: 0, max: 1}
  timeout: 3s
"""


@pytest.fixture
def server(cluster, tmp_path):
    cluster.add_node("plain", gpus=2)
    plane = KubeServer(tmp_path, cluster)
    plane.start()
    yield plane
    plane.close()


def test_a_replica_is_a_bound_pod_reached_at_its_ip_and_port(cluster, server):
    path = server.root / "tiny.yaml"
    path.write_text(SERVICE)
    server.ok("serve", str(path))
    creds = __import__("json").loads(server.credentials.read_text())
    client = openai.OpenAI(base_url=f"{creds['url']}/v1", api_key=creds["token"],
                           max_retries=0, timeout=60)
    with pytest.raises(openai.APIStatusError) as raised:
        client.completions.create(model="tiny", prompt="hi")
    assert raised.value.status_code == 503 and raised.value.response.headers["Retry-After"]
    [replica] = server.json("services")[0]["jobs"]
    pod = cluster.api.get(f"{pods_path(cluster.namespace)}/rota-{replica['id']}-0-0")
    assert pod["spec"]["nodeName"] and pod["metadata"]["annotations"]["rota.dev/port"] == "8000"
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["ROTA_PORT"] == "8000"
    seen = poll(lambda: (r := server.json("services")[0]["jobs"][0])["endpoint"] and r,
                "the replica's endpoint", timeout=60.0, every=0.5)
    assert seen["endpoint"] == f"{pod_ip(cluster, replica['id'])}:8000"
    assert not seen["ready"]  # nothing listens on a kwok Pod


def pod_ip(cluster, job: str) -> str:
    return cluster.api.get(f"{pods_path(cluster.namespace)}/rota-{job}-0-0")["status"]["podIP"]
