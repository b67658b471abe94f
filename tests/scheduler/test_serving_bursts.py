"""Autoscaling bursts never take a cohort past its quota: the serving runtime's scaling
decision (``rota.core.serving.desired_replicas``, with headroom) run tick by tick through the
real scheduler (``rota plan``'s loop: cycles at one ``now``, victims requeued at once).

Each example is one burst: a cohort of one or two service queues and a training queue, with
random nominal quotas (some borrowing limits); one or two services with random
``min``/``max``/``target``/``headroom``/idle window and GPUs per replica; training jobs that
borrow what the services leave; then random request counts per tick. Each tick the services
want ``desired_replicas`` of their window of samples, as the runtime decides: missing replicas
are submitted (not preemptible, as the runtime submits them, and preemptible once they ran a
tick: ready), extra ones are cancelled (pending first); the scheduler settles. After every
tick:

- the GPUs that the jobs of the cohort's queues hold are at most the sum of their nominal
  quotas, and each queue holds at most its nominal quota plus its borrowing limit;
- a service never has more replicas than its need plus its headroom, nor more than ``max``.

``ROTA_BURST_EXAMPLES`` sets the number of bursts (the suite runs 1,000).
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import replace

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from rota.cli.plan import run_plan
from rota.core import (
    ANY_FLAVOR, Flavor, FlavorQuota, GpuDevice, GpuRequest, Job, JobKind, JobState, Node, Queue,
    ReplicaRequest,
)
from rota.core.serving import ServiceSettings, desired_replicas
from rota.scheduler import Snapshot, build_policy

BURSTS = int(os.environ.get("ROTA_BURST_EXAMPLES", "1000"))
GiB = 1024
POLICY = build_policy({"preset": "default", "backfill": "none"})


def cohort(rng: random.Random, services: int) -> dict[str, Queue]:
    queues = {}
    for name in [f"s{k}" for k in range(services)] + ["train"]:
        nominal = rng.randint(0, 6) * 1000
        borrowing = {"gpu": rng.randint(0, 4) * 1000} if rng.random() < 0.3 else {}
        queues[name] = Queue(name, {ANY_FLAVOR: FlavorQuota({"gpu": nominal}, borrowing)}, "c")
    return queues


def service(rng: random.Random) -> ServiceSettings:
    top = rng.randint(1, 6)
    return ServiceSettings(("m",), min_replicas=rng.randint(0, min(top, 2)), max_replicas=top,
                           target=rng.randint(1, 8), headroom=rng.randint(0, top),
                           idle_s=float(rng.randint(1, 4)))


def roomy() -> tuple[Node, ...]:
    devices = tuple(GpuDevice(k, "H100", 80 * GiB) for k in range(64))
    return (Node("n", 1024 * 1000, 4096 * GiB, devices),)


def replica(name: str, queue: str, gpus: int, t: float) -> Job:
    return Job(name, "p", queue, ReplicaRequest(1000, GiB, GpuRequest(gpus)), priority=10,
               kind=JobKind.SERVICE, submit_time=t, preemptible=False,
               labels=(("rota.service", queue),))


def training(rng: random.Random, k: int) -> Job:
    return Job(f"t{k}", "p", "train", ReplicaRequest(1000, GiB, GpuRequest(rng.choice([1, 2]))),
               priority=0, submit_time=0.0)


def scaled(jobs: list[Job], queue: str, want: int, gpus: int, t: float,
           made: list[int]) -> list[Job]:
    """The runtime's move for one service: submit what is missing, cancel what is extra
    (those not running first, newest first)."""
    mine = [j for j in jobs if j.queue == queue]
    others = [j for j in jobs if j.queue != queue]
    if len(mine) < want:
        for _ in range(want - len(mine)):
            made[0] += 1
            mine.append(replica(f"{queue}-r{made[0]}", queue, gpus, t))
    elif len(mine) > want:
        order = sorted(mine, key=lambda j: (j.state is JobState.RUNNING, -j.submit_time, j.id))
        gone = {j.id for j in order[:len(mine) - want]}
        mine = [j for j in mine if j.id not in gone]
    return others + mine


def ready(jobs: tuple[Job, ...]) -> list[Job]:
    """Replicas that ran a tick are ready: preemptible again (what their service says)."""
    return [replace(j, preemptible=True) if j.kind is JobKind.SERVICE
            and j.state is JobState.RUNNING else j for j in jobs]


def within_quota(snap: Snapshot) -> None:
    held: dict[str, int] = {}
    for j in snap.jobs:
        if j.state.holds_resources:
            held[j.queue] = held.get(j.queue, 0) + j.total()["gpu"]
    quotas = {q.name: q.quotas[ANY_FLAVOR] for q in snap.queues.values()}
    total = sum(q.nominal["gpu"] for q in quotas.values())
    assert sum(held.values()) <= total, f"the cohort holds {held}, its quota is {total}"
    for name, q in quotas.items():
        if "gpu" in q.borrowing_limit:
            assert held.get(name, 0) <= q.nominal["gpu"] + q.borrowing_limit["gpu"], name


@settings(max_examples=BURSTS, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1))
def test_autoscaling_bursts_never_exceed_the_cohorts_quota(seed):
    note(f"seed {seed}")
    rng = random.Random(seed)
    count = rng.randint(1, 2)
    queues = cohort(rng, count)
    services = {f"s{k}": (service(rng), rng.choice([1, 1, 2])) for k in range(count)}
    windows: dict[str, list[int]] = {name: [] for name in services}
    jobs = [training(rng, k) for k in range(rng.randint(0, 8))]
    snap = Snapshot(roomy(), queues, tuple(jobs), {}, {ANY_FLAVOR: Flavor(ANY_FLAVOR)})
    made = [0]
    for tick in range(rng.randint(3, 8)):
        t = float(tick)
        jobs = ready(snap.jobs)
        for name, (s, gpus) in services.items():
            windows[name].append(rng.choice([0, 0, 1, 3, rng.randint(0, 40)]))
            window = windows[name][-int(s.idle_s):]
            want = desired_replicas(s, window)
            need = max(math.ceil(c / s.target) for c in window)
            assert want <= min(s.max_replicas, max(s.min_replicas, need + s.headroom))
            jobs = scaled(jobs, name, want, gpus, t, made)
        snap = run_plan(replace(snap, jobs=tuple(jobs)), POLICY, t).final
        within_quota(snap)
