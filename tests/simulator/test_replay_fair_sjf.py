"""The ``fair-sjf`` replay policy on a tiny hand-made trace: fair share between VCs, shortest
walltime estimate inside each, no preemption. Expected times are worked out in comments."""

from __future__ import annotations

import pytest

from rota.simulator.philly import PhillyJob
from rota.simulator.replay import ReplayConfig, replay
from rota.simulator.replay_metrics import summarise

T0 = 1_500_000_000.0


def trace(*rows: tuple[float, float, int, str]) -> list[PhillyJob]:
    """(submit offset s, duration s, GPUs, VC) -> jobs named a, b, c, ..."""
    return [PhillyJob(chr(ord("a") + k), T0 + t, d, g, vc) for k, (t, d, g, vc) in enumerate(rows)]


def times(result) -> dict[str, tuple[float | None, float | None]]:
    return {r.src.id: (r.first_start, r.finish) for r in result.runs}


# One node of 8 GPUs, every job takes all of it. x's a holds the node 0-1000; meanwhile x
# submits b (100 s) and d (50 s), y submits c (500 s).
JOBS = trace((0, 1000, 8, "x"), (10, 100, 8, "x"), (20, 500, 8, "y"), (30, 50, 8, "x"))


@pytest.mark.parametrize("policy, expected", [
    # fair-sjf: at 1000 x has used 8,000 GPU-s and y nothing, so y's c goes first (1000-1500);
    # then only x is left, shortest first: d 1500-1550, b 1550-1650.
    ("fair-sjf", {"a": (0, 1000), "b": (1550, 1650), "c": (1000, 1500), "d": (1500, 1550)}),
    # sjf-est (estimates = durations with noise 1): d 1000-1050, b 1050-1150, c 1150-1650.
    ("sjf-est", {"a": (0, 1000), "b": (1050, 1150), "c": (1150, 1650), "d": (1000, 1050)}),
    # fairshare (fair share, then submission inside a VC): c first too, then b before d.
    ("fairshare", {"a": (0, 1000), "b": (1500, 1600), "c": (1000, 1500), "d": (1600, 1650)}),
], ids=["fair-sjf", "sjf-est", "fairshare"])
def test_fair_share_between_vcs_and_shortest_first_inside(policy, expected):
    result = replay(JOBS, policy, ReplayConfig(8))
    assert times(result) == expected
    assert all(r.preemptions == 0 for r in result.runs)


def test_slowdown_per_vc_and_jain_worked_out():
    # Slowdown = JCT / duration. fair-sjf: a 1, b (1650-10)/100 = 16.4, d (1550-30)/50 = 30.4,
    # c (1500-20)/500 = 2.96; x averages (1 + 16.4 + 30.4) / 3 = 15.93, y 2.96.
    # sjf-est: b 11.4, d 20.4, c (1650-20)/500 = 3.26; x (1 + 11.4 + 20.4) / 3 = 10.93, y 3.26.
    # Jain (sum x)^2 / (n sum x^2): fair-sjf 18.89^2 / (2 x 262.6) = 0.680;
    # sjf-est 14.19^2 / (2 x 130.1) = 0.774. Fair share of GPU time is not equal slowdown:
    # y's one long job gains 0.3 of slowdown, x's short jobs lose 5 and 10.
    fair = summarise(replay(JOBS, "fair-sjf", ReplayConfig(8)))
    sjf = summarise(replay(JOBS, "sjf-est", ReplayConfig(8)))
    assert fair["slowdown_by_project"]["y"] == pytest.approx(1480 / 500)
    assert sjf["slowdown_by_project"]["y"] == pytest.approx(1630 / 500)
    assert fair["slowdown_by_project"]["x"] == pytest.approx((1 + 16.4 + 30.4) / 3)
    assert fair["jain_slowdown"] == pytest.approx(0.680, abs=1e-3)
    assert sjf["jain_slowdown"] == pytest.approx(0.774, abs=1e-3)


def test_fair_sjf_orders_by_the_estimate_not_the_run_time():
    # x's e (90 s) and f (100 s) wait behind a; with estimates duration x U(1, 3) fair-sjf
    # starts first the one with the smaller estimate, which for some seeds is f.
    jobs = trace((0, 100, 8, "x"), (1, 90, 8, "x"), (2, 100, 8, "x"))
    flipped = 0
    for seed in range(10):
        result = replay(jobs, "fair-sjf", ReplayConfig(8, walltime_noise=3, seed=seed))
        first = min(result.runs[1:], key=lambda r: r.estimate)
        assert first.first_start == 100
        flipped += first.src.id == "c"
    assert 0 < flipped < 10
