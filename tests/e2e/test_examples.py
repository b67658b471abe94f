"""The batch job files of ``examples/jobs`` run to the end on a real ``rota up`` (four virtual
GPUs on whatever machine), as the README tells a new user to try them: submitted as they are,
their working directory uploaded, each ends ``succeeded`` with its output in ``rota logs``.
(``notebook-half-gpu.yaml`` starts JupyterLab, which its comments say to install first.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_budgets import ok, rota, shown, until

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name, replicas, line", [
    ("one-gpu", 1, "epoch 10/10"),
    ("gang-two-replicas", 2, "epoch 10/10"),
    ("checkpointed", 1, "epoch 100/100"),
])
def test_an_example_job_runs_to_the_end(rota_server, name, replicas, line):
    path = ROOT / "examples" / "jobs" / f"{name}.yaml"
    job = json.loads(ok(rota(rota_server, "submit", str(path), "--json")))["id"]
    until(f"{name} to end", lambda: shown(rota_server, job)["state"] in (
        "succeeded", "failed", "cancelled"))
    for rank in range(replicas):
        out = ok(rota(rota_server, "logs", job, "--replica", str(rank)))
        assert line in out, out
        if replicas > 1:
            assert f"replica {rank} of {replicas}" in out
    assert shown(rota_server, job)["state"] == "succeeded"
    if replicas > 1:  # every replica's at once, each line labelled with its rank
        labelled = ok(rota(rota_server, "logs", job, "--all-replicas", "--stdout"))
        for rank in range(replicas):
            own = ok(rota(rota_server, "logs", job, "--replica", str(rank), "--stdout"))
            assert [line[len(f"{rank}: "):] for line in labelled.splitlines()
                    if line.startswith(f"{rank}: ")] == own.splitlines()
        assert all(line[:3] in ("0: ", "1: ") for line in labelled.splitlines())
        followed = ok(rota(rota_server, "logs", job, "--all-replicas", "-f", "--stdout"))
        assert sorted(followed.splitlines()) == sorted(labelled.splitlines())
