"""Cycles that would repeat the last one, which changed nothing, are skipped
(``rota.simulator.quiet``): a replay decides exactly as one that runs them all, on a hand-made
trace and on a day of the Philly trace with per-VC quotas, under every preempting policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from rota.simulator.philly import PhillyJob, load, parse_quotas, parse_window, within
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
    if policy == "fairshare":
        # its order decays usage with the clock: no cycle repeats another
        assert skipping.skipped == running_all.skipped
    else:
        assert skipping.skipped > running_all.skipped
