"""Serving on the Slurm fixture: a service's replica is a Slurm job rota placed, its server
listens on ROTA_PORT on the node, and the gateway of ``rota up --backend slurm`` reaches it
there (``Backend.endpoint``: the node's address and the port), as the official ``openai``
client sees it: the first request waits for the replica, the answer streams back."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from slurmserver import SlurmServer, running

openai = pytest.importorskip("openai", reason="the official openai client is a test dependency")

MODEL_SERVER = Path(__file__).resolve().parents[2] / "examples" / "serving" / "bigram_lm.py"


@pytest.fixture
def server(slurm_env) -> Iterator[SlurmServer]:
    with running(slurm_env, "rota-slurm-serving-") as plane:
        yield plane


def test_a_service_replica_runs_as_a_slurm_job_and_the_gateway_reaches_it(server):
    svc = server.work / "svc"
    svc.mkdir()
    shutil.copy(MODEL_SERVER, svc / MODEL_SERVER.name)
    (svc / "service.yaml").write_text(yaml.safe_dump({
        "name": "tiny", "kind": "service", "workdir": ".",
        "entrypoint": [sys.executable, MODEL_SERVER.name, "--model", "tiny", "--host",
                       "0.0.0.0"],
        "resources": {"cpu": 1, "memory": "256Mi", "gpu": 1},
        "service": {"models": ["tiny"], "replicas": {"min": 0, "max": 1}, "timeout": "2m"}}))
    server.cli("serve", "svc/service.yaml")
    creds = json.loads(server.credentials.read_text())
    client = openai.OpenAI(base_url=f"{creds['url']}/v1", api_key=creds["token"], timeout=180)
    answer = client.completions.create(model="tiny", prompt="hello", max_tokens=12)
    assert answer.choices[0].text
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model="tiny", prompt="hello", max_tokens=12, stream=True) if c.choices)
    assert streamed == answer.choices[0].text
    [seen] = server.json("services")
    [replica] = seen["jobs"]
    assert replica["ready"] and replica["endpoint"]
    job = server.job(replica["id"])
    assert job["placement"][0]["node"].startswith("node")  # a Slurm node rota chose
    assert any(j.name.startswith(f"rota-{replica['id']}-") for j in server.slurm_jobs())
