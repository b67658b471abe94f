"""Both clients submit a job file as it is on disk, with the command line's choices as the
query (``rota.api.jobfile``), against the same real server on loopback: the same job, each
submitted once however often it is sent."""

from __future__ import annotations

import pytest

from rota.client import Client
from rota.client.bare import BareClient
from rota.client.credentials import Credentials

FILE = b"name: from-file\nentrypoint: python train.py\nresources: {gpu: 1, memory: 1Gi}\n"


@pytest.mark.parametrize("kind", [Client, BareClient], ids=["client", "bare"])
def test_a_job_file_and_its_query_make_the_job(server, kind):
    client = kind(Credentials(server.url, server.tokens["alice"], "test"))
    try:
        job = client.submit(FILE, key=f"file-{kind.__name__}",
                            params={"queue": "default", "default_project": "vision",
                                    "project": None, "array": "0-1"})
        again = client.submit(FILE, key=f"file-{kind.__name__}",
                              params={"queue": "default", "default_project": "vision",
                                      "array": "0-1"})
    finally:
        client.close()
    assert again["id"] == job["id"]
    tasks = [server.store.get_job(t) for t in server.store.job_ids("vision")
             if server.store.get_job(t).array_id == job["id"]]
    assert sorted(t.array_index for t in tasks) == [0, 1]
    assert {(t.name, t.job.project, t.job.queue, t.job.request.gpu.count) for t in tasks} == \
        {("from-file", "vision", "default", 1)}
