"""Failover between two ``rota up --backend kubernetes`` on one PostgreSQL database, as the two
replicas of deploy/kubernetes/rota.yaml run: the second stands by (its API takes a submit,
which the leader runs; ``rota status --leader``, the Deployment's readiness check, fails on it
alone), and takes over within 10 s of the leader's ``kill -9`` or of its freezing (SIGSTOP)
past its lease, adopting the Pod the leader created (the same uid) instead of creating another,
then runs new work itself; a frozen leader woken after the takeover acts no more and exits."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import time
from typing import Iterator

import pytest

from rota.backends.kube.api import pods_path
from upkit import KubeServer
from waiting import poll

wait = functools.partial(poll, timeout=90, every=0.2)
TAKEOVER_S = 10.0  # the promise: a standby leads within 10 s of the leader's death


@pytest.fixture
def planes(cluster, tmp_path, empty_postgres) -> Iterator[tuple[KubeServer, KubeServer]]:
    """A leader, then a standby, on one database and a cluster of one 4-GPU node."""
    cluster.add_node("plain", gpus=4)
    made = []
    try:
        for name in ("leader", "standby"):
            (tmp_path / name).mkdir()
            plane = KubeServer(tmp_path / name, cluster)
            plane.env["ROTA_DB_URL"] = empty_postgres
            made.append(plane)
            plane.start()
        yield made[0], made[1]
    finally:
        for plane in made:
            if plane.proc is not None:
                try:
                    os.killpg(plane.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            plane.close()


def pods(cluster) -> list[dict]:
    return cluster.api.get(pods_path(cluster.namespace))["items"]


def running(server: KubeServer, job_id: str) -> dict | None:
    job = server.json("show", job_id)
    return job if job["state"] == "running" else None


def test_a_standby_takes_over_a_killed_leader_and_adopts_its_pods(cluster, planes) -> None:
    leader, standby = planes
    status = standby.json("status")
    assert status["role"] == "standby" and status["leader"] == leader.json("status")["holder"]
    assert leader.rota("status", "--leader").returncode == 0
    assert standby.rota("status", "--leader").returncode == 3  # not ready: the Service skips it
    first = standby.json("run", "--gpus", "1", "--", "sleep", "600")["id"]  # via the standby
    wait(lambda: running(standby, first), "the leader to run the job")
    [pod] = pods(cluster)
    killed = time.time()
    leader.kill9()
    took = wait(lambda: (s := standby.json("status"))["role"] == "leader" and s,
                "the standby to take over")
    assert took["leading_since"] - killed <= TAKEOVER_S, took["leading_since"] - killed
    assert standby.rota("status", "--leader").returncode == 0
    second = standby.json("run", "--gpus", "1", "--", "sleep", "600")["id"]
    wait(lambda: running(standby, second), "the new leader to run a job")
    assert running(standby, first)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(cluster)}
    assert uids[pod["metadata"]["name"]] == pod["metadata"]["uid"]  # adopted, not created again
    assert sorted(uids) == sorted([f"rota-{first}-0-0", f"rota-{second}-0-0"])


def test_a_leader_frozen_past_its_lease_is_taken_over_and_steps_down(cluster, planes) -> None:
    leader, standby = planes
    first = standby.json("run", "--gpus", "1", "--", "sleep", "600")["id"]
    wait(lambda: running(standby, first), "the leader to run the job")
    [pod] = pods(cluster)
    assert leader.proc is not None
    frozen = time.time()
    os.killpg(leader.proc.pid, signal.SIGSTOP)
    took = wait(lambda: (s := standby.json("status"))["role"] == "leader" and s,
                "the standby to take over")
    assert took["leading_since"] - frozen <= TAKEOVER_S, took["leading_since"] - frozen
    second = standby.json("run", "--gpus", "1", "--", "sleep", "600")["id"]
    wait(lambda: running(standby, second), "the new leader to run a job")
    os.killpg(leader.proc.pid, signal.SIGCONT)
    try:
        assert leader.proc.wait(timeout=60) == 3  # it found its lease taken: it stops
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the old leader did not stop:\n{leader.output()}") from None
    leader.proc = None
    woken = leader.output().split("lost the control-loop lease", 1)
    assert len(woken) == 2, leader.output()
    assert "launched" not in woken[1] and " -> " not in woken[1]  # it acted no more
    assert running(standby, first)
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(cluster)}
    assert uids[pod["metadata"]["name"]] == pod["metadata"]["uid"]  # adopted, not created again
    assert sorted(uids) == sorted([f"rota-{first}-0-0", f"rota-{second}-0-0"])
