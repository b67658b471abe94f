"""Faults of the infrastructure are not the user's failures, on a real ``rota up``: a job whose
supervisor is ``kill -9``ed (as when its node dies) is requeued without spending its restart
budget, and then succeeds although it has ``max_retries: 0``."""

from __future__ import annotations

import json
import os
import signal
import sys
from functools import partial

from rota.backends.procs import is_running
from waiting import poll

wait_for = partial(poll, timeout=60.0, every=0.1)
# runs until a file named after its attempt appears: 'go-0', 'go-1', ...
WAITER = ("import os, time\n"
          "a = os.environ['ROTA_ATTEMPT']\n"
          "open('started-' + a, 'w').close()\n"
          "while not os.path.exists('go-' + a): time.sleep(0.05)\n")


def test_a_job_whose_supervisor_is_killed_is_requeued_and_then_succeeds(rota_server) -> None:
    data = rota_server.data_dir
    with rota_server.client() as client:
        reply = client.post("/v1/jobs", json={
            "project": "default", "queue": "default", "entrypoint": [sys.executable, "-c", WAITER],
            "resources": {"gpu": 1, "cpu": "100m", "memory": "64Mi"},
            "restart": {"max_retries": 0}})
        assert reply.status_code == 201, reply.text
        job = str(reply.json()["id"])
        work = data / "jobs" / job / "work"
        wait_for((work / "started-0").exists, "attempt 0 to run")
        handle = json.loads((data / "jobs" / job / "attempt-0" / "handle.json").read_text())
        os.kill(handle["replicas"][0]["ref"]["pid"], signal.SIGKILL)

        wait_for((work / "started-1").exists, "the job to be requeued and run again")
        (work / "go-1").write_text("")
        done = wait_for(lambda: (j := client.get(f"/v1/jobs/{job}").json())["state"] in (
            "succeeded", "failed") and j, "attempt 1 to end")
    assert done["state"] == "succeeded", done
    assert done["failures"] == 0 and done["attempts"] == 1
    assert [(a["attempt"], a["end"]) for a in done["history"]] == [(0, "node-lost"),
                                                                   (1, "succeeded")]
    assert "was lost" in done["history"][0]["reason"]
    child = json.loads((data / "jobs" / job / "attempt-0" / "replica-0" / "child.json")
                       .read_text())
    assert not is_running(child["pid"], child["start_ticks"])  # no orphan outlives it
