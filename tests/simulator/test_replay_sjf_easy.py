"""The ``sjf-easy`` replay policy: shortest walltime estimate first, with EASY backfill, so that
a large gang that cannot start gets a reservation instead of waiting behind every smaller job.
Expected times are worked out in comments."""

from __future__ import annotations

import pytest

from rota.simulator.philly import PhillyJob
from rota.simulator.replay import ReplayConfig, replay

T0 = 1_500_000_000.0


def trace(*rows: tuple[float, float, int, str]) -> list[PhillyJob]:
    """(submit offset s, duration s, GPUs, VC) -> jobs named a, b, c, ..."""
    return [PhillyJob(chr(ord("a") + k), T0 + t, d, g, vc) for k, (t, d, g, vc) in enumerate(rows)]


# Two nodes of 8 GPUs. x's a (100 s) and b (300 s) take one node each at 0; y's gang c needs
# both nodes for 50 s (t=10); x's d needs one node for 400 s (t=20). Estimates are exact.
JOBS = trace((0, 100, 8, "x"), (0, 300, 8, "x"), (10, 50, 16, "y"), (20, 400, 8, "x"))


@pytest.mark.parametrize("policy, expected", [
    # sjf-est: at 100 a's node is free; c (shortest) cannot start on 8 GPUs, d can: d 100-500.
    # c waits for d as well as b: 500-550.
    ("sjf-est", {"a": (0, 100), "b": (0, 300), "c": (500, 550), "d": (100, 500)}),
    # sjf-easy: c is first in the order and cannot start, so it holds a reservation for 16 GPUs
    # at 300 (b's estimated end). d would run until 500 on a reserved node: it does not
    # backfill, a's node idles 100-300, c runs 300-350, then d 350-750.
    ("sjf-easy", {"a": (0, 100), "b": (0, 300), "c": (300, 350), "d": (350, 750)}),
], ids=["sjf-est", "sjf-easy"])
def test_a_large_gang_gets_a_reservation_under_sjf_easy(policy, expected):
    result = replay(JOBS, policy, ReplayConfig(16))
    assert {r.src.id: (r.first_start, r.finish) for r in result.runs} == expected


def test_a_short_job_backfills_when_it_ends_before_the_reservation():
    # as above, but d takes 150 s: from 100 it ends at 250, before c's reservation at 300, so
    # it backfills on a's node: d 100-250, c 300-350.
    jobs = trace((0, 100, 8, "x"), (0, 300, 8, "x"), (10, 50, 16, "y"), (20, 150, 8, "x"))
    result = replay(jobs, "sjf-easy", ReplayConfig(16))
    got = {r.src.id: (r.first_start, r.finish) for r in result.runs}
    assert got["d"] == (100, 250)
    assert got["c"] == (300, 350)


def test_lists_sorted_by_walltime_are_cut_short_with_the_same_decisions(monkeypatch):
    # With backfill, a cycle is shown every job of a list up to K, unless the lists are sorted
    # by walltime first: then a job that cannot start hides only longer jobs of the same shape,
    # which cannot start either. Cutting the lists must not change a single start.
    import random

    import rota.simulator.replay as engine

    rng = random.Random(7)
    jobs = trace(*[(rng.uniform(0, 3000), rng.choice([60, 300, 900, 4000]),
                    rng.choice([1, 2, 4, 8, 16]), rng.choice("xyz")) for _ in range(120)])
    jobs.sort(key=lambda j: j.submit)
    cut = replay(jobs, "sjf-easy", ReplayConfig(16, walltime_noise=2, depth=4))
    assert cut.runs and all(r.finish is not None for r in cut.runs)

    class Unsorted:
        pending_key = staticmethod(lambda job: ())

    monkeypatch.setattr(engine, "ShortestFirst", Unsorted)  # every list shown up to K again
    full = replay(jobs, "sjf-easy", ReplayConfig(16, walltime_noise=2, depth=4))
    assert [(r.src.id, r.first_start, r.finish) for r in cut.runs] == \
        [(r.src.id, r.first_start, r.finish) for r in full.runs]
