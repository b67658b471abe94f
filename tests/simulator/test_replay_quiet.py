"""Cycles that would repeat the last one, which changed nothing, are skipped
(``rota.simulator.quiet``): a replay decides exactly as one that runs them all, on a hand-made
trace and on a day of the Philly trace with per-VC quotas, under every preempting policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import job
from rota.core import Project
from rota.core.decisions import Decisions
from rota.scheduler import build_policy
from rota.simulator.philly import PhillyJob, load, parse_quotas, parse_window, within
from rota.simulator.quiet import Holdings, QuietCycles
from rota.simulator.replay import ReplayConfig, replay
from rota.spec import read_yaml

ROOT = Path(__file__).resolve().parents[2]
PHILLY = ROOT.parent / "shared/traces/philly-pollux/philly.csv"
T0 = 1_500_000_000.0


def outcome(result) -> dict[str, tuple]:
    """Every job's first start, finish and preemptions: what the replay's figures come from."""
    return {r.src.id: (r.first_start, r.finish, r.preemptions) for r in result.runs}


def both(jobs, policy: str, config: ReplayConfig):
    skipping = replay(jobs, policy, config)
    running_all = replay(jobs, policy, ReplayConfig(
        config.gpus, config.depth, config.walltime_noise, quotas=config.quotas,
        skip_repeats=False))
    return skipping, running_all


def test_a_cycle_that_would_repeat_a_quiet_one_is_skipped_and_nothing_changes():
    # One node. x's job a (8 GPUs, 5000 s) runs from 0 within x's quota; six 8-GPU jobs of
    # y (2000 s each) arrive every 10 s from 10 on, with no quota of y's own in the cohort:
    # none may evict a. With a queue depth of 4 a list is shown its first 4 jobs, so the
    # arrivals at 50 and 60 are not shown: those cycles would see what the cycle at 40 saw,
    # which started nothing (it reserved for y00 from 5000, which no shown job ends before
    # at 40 or later), with nothing ended since. y's jobs then run one after another from
    # 5000: 5000-7000, 7000-9000, ...
    rows = [("a", 0, 5000, "x")] + [(f"y{k:02d}", 10 * (k + 1), 2000, "y") for k in range(6)]
    jobs = [PhillyJob(name, T0 + t, d, 8, vc) for name, t, d, vc in rows]
    quotas = parse_quotas({"x": {"gpus": 8, "cohort": "all"},
                           "*": {"gpus": 0, "cohort": "all"}}, ["x", "y"])
    skipping, running_all = both(jobs, "fair", ReplayConfig(8, 4, 1, quotas=quotas))
    assert outcome(skipping) == outcome(running_all)
    assert [outcome(skipping)[f"y{k:02d}"] for k in (0, 1)] == [(5000, 7000, 0), (7000, 9000, 0)]
    assert skipping.skipped == running_all.skipped + 2  # the arrivals at 50 and 60
    assert skipping.cycles + skipping.skipped == running_all.cycles + running_all.skipped


@pytest.mark.parametrize("policy", ["fair", "fairshare", "las", "fair-sharing"])
def test_a_day_of_philly_with_quotas_decides_alike_with_and_without_skipping(policy):
    if not PHILLY.is_file():
        pytest.skip(f"the Philly trace is not at {PHILLY}")
    jobs = within(load(PHILLY), *parse_window("2017-10-22 06:00..2017-10-22 18:00"))
    quotas = parse_quotas(read_yaml(ROOT / "examples/philly/quotas-64.yaml"),
                          sorted({j.vc for j in jobs}))
    skipping, running_all = both(jobs, policy, ReplayConfig(64, quotas=quotas, walltime_noise=2))
    assert outcome(skipping) == outcome(running_all)
    assert sum(r.preemptions for r in skipping.runs) > 0 or policy == "fairshare"
    # fairshare's order decays usage with the clock: a quiet cycle repeats only while it
    # ranks the projects alike
    assert skipping.skipped > running_all.skipped


def test_under_fairshare_a_quiet_cycle_repeats_only_while_the_projects_rank_alike():
    # fairshare ranks projects by decayed GPU-seconds, which change with the clock even when
    # nothing starts or ends: the first project of the ranking is tried first, and would be
    # the one reserved for, so a cycle whose ranking differs is run
    quiet = QuietCycles(build_policy("fairshare"), clock_free=True)
    jobs = [job("x1").project("x").gpus(8).build(), job("y1").project("y").gpus(8).build()]
    quiet.ran(10.0, jobs, frozenset(), 0, [], Decisions(), Holdings({"x": 100.0, "y": 200.0},
                                                                     {}, {}))
    assert quiet.repeats(20.0, jobs, frozenset(), 0, [], Holdings({"x": 150.0, "y": 200.0}, {}, {}))
    assert not quiet.repeats(20.0, jobs, frozenset(), 0, [],
                             Holdings({"x": 250.0, "y": 200.0}, {}, {}))
    # what a project holds counts as well (as if held for one half-life), so does its weight
    assert not quiet.repeats(20.0, jobs, frozenset(), 0, [],
                             Holdings({"x": 100.0, "y": 200.0}, {"x": {"gpu": 8000}}, {}))
    assert not quiet.repeats(20.0, jobs, frozenset(), 0, [], Holdings(
        {"x": 100.0, "y": 200.0}, {}, {"y": Project("y", weight=4.0)}))
