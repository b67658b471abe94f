"""``rota show`` of a pending job with the forecast's ``estimate`` reason, against a real
server: the jobs that hold what it needs and when each ends, relative to now, and its
estimated start; or why there is no estimate."""

from __future__ import annotations

import json

from cli_support import ok
from rota.core.decisions import Decisions, Holder, Reason, ReasonCode, Wait


def test_show_names_the_jobs_a_pending_job_waits_for_and_until_when(server):
    job = json.loads(ok(server.rota("run", "--gpus", "4", "--json", "--", "true")))["id"]
    other = json.loads(ok(server.rota("run", "--gpus", "4", "--json", "--", "true")))["id"]
    now = server.store.clock()
    server.store.apply(Decisions(waits=[
        Wait(job, (Reason(ReasonCode.RESOURCES),
                   Reason(ReasonCode.ESTIMATE, holders=(
                       Holder("812", ("gpu-0",), now + 3930, True),
                       Holder("815", ("gpu-0",), None, False)))), now + 3930),
        Wait(other, (Reason(ReasonCode.RESOURCES),
                     Reason(ReasonCode.ESTIMATE, detail="no-walltime", holders=(
                         Holder("815", ("gpu-0",), None, False),))))]), now)
    text = " ".join(ok(server.rota("show", job)).split())
    assert ("Estimated from walltimes: what it needs is held by 812 on gpu-0 (ends within "
            "1h5m), 815 on gpu-0 (no walltime, forecast to start first).") in text
    assert "Estimated start: in 1h5m" in text
    text = " ".join(ok(server.rota("show", other)).split())
    assert ("No start estimate: it waits behind jobs without a walltime, which may run for "
            "ever: 815 on gpu-0 (no walltime, forecast to start first).") in text
    assert "Estimated start: unknown" in text
    shown = json.loads(ok(server.rota("show", job, "--json")))
    assert shown["wait_reasons"][1]["holders"][0] == {"job": "812", "nodes": ["gpu-0"],
                                                      "end": now + 3930, "running": True}
