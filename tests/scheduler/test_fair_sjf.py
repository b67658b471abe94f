"""``fair-shortest-first`` (preset ``fair-sjf``): fair share between projects, shortest
walltime inside each, no preemption.

The key of a project is the ``fairshare`` one: past GPU-seconds decayed with the half-life,
plus what it holds now (placements of this cycle included) counted as held for one
half-life, divided by its weight; ties go to the project first by name. Every case below
uses a half-life of one hour and ``now = 0`` (no decay), so the keys are whole numbers of
GPU-seconds: a project that used 2 GPU-h starts at 7,200 and each 1-GPU job it is given
adds 3,600.
"""

from __future__ import annotations

import pytest

from builders import bound, cluster, decide, job, node
from rota.scheduler import build_policy

HOUR = 3600.0


def fair_sjf(half_life_s: float = HOUR) -> dict:
    return {"preset": "fair-sjf", "order": {"name": "fair-shortest-first",
                                            "args": {"half_life_s": half_life_s}}}


def two_projects(a_used_h: float = 2.0, a_weight: float = 1.0, b_used_h: float = 0.0):
    """8 free GPUs, five 1-GPU jobs: all of them start, so the bind order is the sequence."""
    return (cluster().nodes(node("n").gpus(8))
            .project("A", weight=a_weight, used_gpu_hours=a_used_h)
            .project("B", used_gpu_hours=b_used_h)
            .jobs(job("a-long").project("A").gpus(1).walltime(7200).submitted(0),
                  job("b-mid").project("B").gpus(1).walltime(3600).submitted(1),
                  job("b-short").project("B").gpus(1).walltime(1200).submitted(2),
                  job("b-long").project("B").gpus(1).walltime(9000).submitted(3),
                  job("a-short").project("A").gpus(1).walltime(600).submitted(5)).build())


@pytest.mark.parametrize("snapshot, policy, order", [
    # A used 2 GPU-h (7,200), B nothing. B 0: b-short (shortest of B) -> B 3,600;
    # B 3,600 < A 7,200: b-mid -> B 7,200; tie, A by name: a-short -> A 10,800;
    # B 7,200: b-long -> B 10,800; A: a-long.
    (two_projects(), fair_sjf(), ["b-short", "b-mid", "a-short", "b-long", "a-long"]),
    # The same jobs under fair share alone: inside a project by submission instead.
    (two_projects(), {"preset": "fairshare", "preemption": "none", "backfill": "none",
                      "order": {"name": "fairshare", "args": {"half_life_s": HOUR}}},
     ["b-mid", "b-short", "a-long", "b-long", "a-short"]),
    # ... and under shortest-first alone: walltime only, whoever the project.
    (two_projects(), {"preset": "besteffort", "order": "shortest-first"},
     ["a-short", "b-short", "b-mid", "a-long", "b-long"]),
    # A weight 4: its key is 7,200 / 4 = 1,800, +900 per GPU. A 1,800 then 2,700 goes
    # before B 3,600 after b-short: b-short (B 0), a-short (A 1,800 -> 2,700),
    # a-long (A 2,700 -> 3,600), tie, A by name but it has no more jobs: b-mid, b-long.
    (two_projects(a_weight=4.0), fair_sjf(),
     ["b-short", "a-short", "a-long", "b-mid", "b-long"]),
    # B used more (3 GPU-h = 10,800) than A (7,200): A first, both of its jobs (A 7,200 ->
    # 10,800, tie with B, A by name -> 14,400), then B's three by walltime.
    (two_projects(b_used_h=3.0), fair_sjf(),
     ["a-short", "a-long", "b-short", "b-mid", "b-long"]),
], ids=["fair-sjf", "fairshare-alone", "sjf-alone", "weight-divides-usage", "b-used-more"])
def test_the_exact_order_with_known_usage(snapshot, policy, order):
    assert list(bound(decide(snapshot, policy))) == order


def test_usage_decays_with_the_half_life():
    # A used 16 GPU-h as of t = 0, B 5 GPU-h as of now = 4 h. Half-life 1 h: A decays to
    # 16 x 0.5^4 = 1 GPU-h < 5, so A goes first; half-life 1 day: A keeps 16 x 0.5^(1/6) =
    # 14.25 GPU-h > 5, so B does. One GPU: only the first project's shortest job starts.
    def snap():
        return (cluster().nodes(node("n").gpus(1))
                .project("A", used_gpu_hours=16, as_of=0)
                .project("B", used_gpu_hours=5, as_of=4 * HOUR)
                .jobs(job("a-long").project("A").gpus(1).walltime(5000).submitted(0),
                      job("a-short").project("A").gpus(1).walltime(100).submitted(1),
                      job("b-long").project("B").gpus(1).walltime(9000).submitted(2),
                      job("b-short").project("B").gpus(1).walltime(200).submitted(3)).build())
    assert list(bound(decide(snap(), fair_sjf(HOUR), now=4 * HOUR))) == ["a-short"]
    assert list(bound(decide(snap(), fair_sjf(24 * HOUR), now=4 * HOUR))) == ["b-short"]


def test_a_shortest_job_that_cannot_fit_lets_the_next_of_its_project_go_and_never_preempts():
    # 4 GPUs, 2 held by B's running job. A has no usage and goes first: its shortest job
    # wants 4 GPUs (cannot fit: 2 free), so its next shortest (1 GPU) starts; then A holds
    # 1 GPU (3,600) and B holds 2 (7,200): A's last job (1 GPU) takes the last GPU. B's
    # pending job finds nothing free and evicts no one.
    snap = cluster().nodes(node("n").gpus(4)).jobs(
        job("b-running").project("B").gpus(2).running_on(("n", [0, 1])),
        job("a-gang").project("A").gpus(4).walltime(60).submitted(0),
        job("a-1").project("A").gpus(1).walltime(600).submitted(1),
        job("a-2").project("A").gpus(1).walltime(6000).submitted(2),
        job("b-1").project("B").gpus(1).walltime(10).submitted(3),
    ).build()
    d = decide(snap, "fair-sjf")
    assert list(bound(d)) == ["a-1", "a-2"]
    assert d.preemptions == []


def test_jobs_without_walltime_go_last_in_their_project():
    snap = cluster().nodes(node("n").gpus(1)).jobs(
        job("unknown").gpus(1).submitted(0),
        job("hour").gpus(1).walltime(3600).submitted(1),
    ).build()
    assert list(bound(decide(snap, "fair-sjf"))) == ["hour"]


def test_pending_key_is_the_walltime_order_a_backlog_is_kept_in():
    # The contract the replay's queue depth relies on: within a project the sequence is
    # ascending pending_key, so a backlog sorted by it may be shown head first.
    policy = build_policy("fair-sjf")
    snap = two_projects()
    keyed = sorted(snap.pending, key=policy.order.pending_key)
    assert [j.id for j in keyed] == ["a-short", "b-short", "b-mid", "a-long", "b-long"]
    seq = list(bound(decide(snap, policy)))
    for project in ("a", "b"):
        mine = [j for j in seq if j.startswith(project)]
        assert mine == [j.id for j in keyed if j.id.startswith(project)]
    assert policy.preemption is None and policy.backfill is None
    assert policy.name == "fair-sjf"
