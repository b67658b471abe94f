"""Failover between two ``rota up --backend slurm`` on one PostgreSQL database: the second starts
as a standby (it serves the API, takes submits into the shared database, and launches
nothing), and takes over within 10 s when the leader is killed with ``kill -9``, or frozen with
SIGSTOP past its lease. No job is lost or run twice: each job's command runs once, Slurm holds
one job per attempt rota recorded, and a frozen leader woken after the takeover acts no more
and exits 3.

Both planes share the leader's Slurm instance (``slurm-instance`` copied into the standby's data
directory before its first start, as docs/local-backend.md says), so that each sees the
other's Slurm jobs as rota's own.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

from slurmserver import SlurmServer
from waiting import poll

wait = functools.partial(poll, timeout=180.0, every=0.5)
TAKEOVER_S = 10.0  # the promise: a standby leads within 10 s of the leader's death
JOBS = 8           # 4 GPUs each on 16 GPUs: half run, half wait, when the leader goes
RUNS = 'echo "$ROTA_JOB_ID" >> ../runs; sleep 4'


@pytest.fixture
def pair(slurm_env, empty_postgres) -> Iterator[tuple[SlurmServer, SlurmServer]]:
    """A started leader, and a second plane on its database, not started."""
    base = Path(tempfile.mkdtemp(prefix="rota-slurm-standby-"))
    base.chmod(0o711)
    made: list[SlurmServer] = []
    try:
        for name in ("leader", "standby"):
            root = base / name
            root.mkdir()
            made.append(SlurmServer(root, {**slurm_env, "ROTA_DB_URL": empty_postgres}))
        made[0].start()
        yield made[0], made[1]
    finally:
        for plane in made:
            if plane.proc is not None:
                try:
                    os.killpg(plane.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            plane.close()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def planes(pair) -> tuple[SlurmServer, SlurmServer]:
    """A leader, then a standby sharing its database and Slurm instance."""
    leader, standby = pair
    standby.data_dir.mkdir(mode=0o711)
    shutil.copy(leader.data_dir / "slurm-instance", standby.data_dir / "slurm-instance")
    standby.start()
    return leader, standby


def role(plane: SlurmServer) -> dict:
    with plane.client(timeout=10) as client:
        reply = client.get("/v1/control-plane")
        reply.raise_for_status()
        return reply.json()


def submit_jobs(standby: SlurmServer) -> list[str]:
    """Submitted through the standby's API: they wait in the shared database until the
    leader's loop finds them."""
    return [standby.submit("--gpus", "4", "--", "sh", "-c", RUNS) for _ in range(JOBS)]


def runs(standby: SlurmServer) -> list[str]:
    path = standby.work.parent / "runs"
    return path.read_text().split() if path.exists() else []


def taken_over(standby: SlurmServer) -> dict:
    """The standby's role once it leads (it took the lease at ``leading_since``)."""
    try:
        return wait(lambda: (r := role(standby))["role"] == "leader" and r,
                    "the standby to take the lease over")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; its log:\n{standby.output()[-4000:]}") from None


def each_ran_once(standby: SlurmServer, slurm, jobs: list[str]) -> None:
    """Every job succeeded, its command ran once, and Slurm ran one job per attempt of it."""
    done = {j: wait(lambda j=j: (r := standby.job(j))["state"] in ("succeeded", "failed")
                    and r, f"job {j} to end") for j in jobs}
    assert {j: r["state"] for j, r in done.items()} == {j: "succeeded" for j in jobs}
    assert sorted(runs(standby)) == sorted(jobs)  # each command ran once: none lost or twice
    expected = [f"rota-{j}-{a}" for j in jobs for a in range(done[j]["attempts"] + 1)]
    ours = standby.slurm_jobs()  # every Slurm job with the shared instance's comment
    assert sorted(j.name for j in ours) == sorted(expected)  # one per attempt rota recorded
    accounted = slurm.run(["sacct", "-n", "-P", "-X", "-o", "JobID,JobName", "-j",
                           ",".join(str(j.id) for j in ours)]).split()
    assert sorted(line.split("|")[1] for line in accounted) == sorted(expected)


def test_a_standby_serves_and_takes_over_within_10_s_of_a_kill_9(planes, slurm) -> None:
    slurm.require_accounting()
    leader, standby = planes
    seen = role(standby)
    assert seen["role"] == "standby" and seen["leader"] == role(leader)["holder"]
    assert "role: standby" in standby.output()
    assert standby.cli("status").startswith(f"standby at {standby.url}: {seen['leader']} leads")
    assert leader.cli("status").startswith(f"leader at {leader.url}: {seen['leader']}")
    jobs = submit_jobs(standby)
    wait(lambda: len(runs(standby)) >= 2, "the leader to run jobs")
    killed = time.time()
    leader.kill9()
    took = taken_over(standby)
    assert took["leading_since"] - killed <= TAKEOVER_S, took["leading_since"] - killed
    assert standby.cli("status").startswith(f"leader at {standby.url}: {took['holder']}")
    each_ran_once(standby, slurm, jobs)


def test_a_standby_stopped_cleanly_leaves_the_leader_leading(planes) -> None:
    leader, standby = planes
    holder = role(leader)["holder"]
    assert standby.stop() == 0
    assert role(leader)["role"] == "leader" and role(leader)["holder"] == holder


def test_a_leader_frozen_past_its_lease_is_taken_over_and_steps_down(planes, slurm) -> None:
    slurm.require_accounting()
    leader, standby = planes
    jobs = submit_jobs(standby)
    wait(lambda: len(runs(standby)) >= 2, "the leader to run jobs")
    assert leader.proc is not None
    frozen = time.time()
    os.killpg(leader.proc.pid, signal.SIGSTOP)
    took = taken_over(standby)
    assert took["leading_since"] - frozen <= TAKEOVER_S, took["leading_since"] - frozen
    os.killpg(leader.proc.pid, signal.SIGCONT)
    try:
        assert leader.proc.wait(timeout=60) == 3  # it found its lease taken: it stops
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the old leader did not stop:\n{leader.output()}") from None
    leader.proc = None
    woken = leader.output().split("lost the control-loop lease", 1)
    assert len(woken) == 2, leader.output()
    assert "launched" not in woken[1] and " -> " not in woken[1]  # it acted no more
    each_ran_once(standby, slurm, jobs)


def test_a_second_plane_without_the_leaders_slurm_instance_is_refused(pair) -> None:
    _, second = pair
    second.spawn()
    assert second.proc is not None
    assert second.proc.wait(timeout=120) == 1
    second.proc = None
    output = second.output()
    assert "another control plane is using this database" in output
    assert "No standby: a Slurm standby uses the Slurm instance" in output
    assert f"copy slurm-instance from that one's data directory into {second.data_dir}" in output
