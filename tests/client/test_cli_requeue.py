"""``rota requeue ID`` against a real server: a running job is asked back to pending (it is
``preempting``, reason ``requeued by alice``); a pending job is refused with the reason and
exit status 1."""

from __future__ import annotations

import json

from cli_support import cycle, ok
from rota.core import JobState


def test_requeue_a_running_job_and_not_a_pending_one(server):
    job = json.loads(ok(server.rota("run", "--gpus", "1", "--json", "--", "sleep", "1")))["id"]
    cycle(server)
    server.store.transition(job, JobState.RUNNING)
    said = ok(server.rota("requeue", job))
    assert said.startswith(f"Requeue requested for job {job}: it gets its checkpoint signal")
    shown = json.loads(ok(server.rota("show", job, "--json")))
    assert (shown["state"], shown["reason"]) == ("preempting", "requeued by alice")
    other = json.loads(ok(server.rota("run", "--gpus", "4", "--json", "--", "true")))["id"]
    refused = server.rota("requeue", other)
    assert refused.returncode == 1, refused
    assert f"job {other} is already pending: nothing to requeue" in refused.stderr
