"""The replay engine on tiny hand-made traces, with the expected times worked out in comments,
and the metrics' arithmetic."""

from __future__ import annotations

import pytest

from rota.core import InvalidSpec
from rota.simulator.philly import PhillyJob, parse_quotas
from rota.simulator.replay import ReplayConfig, replay
from rota.simulator.replay_metrics import jain, mean_utilisation, percentile, summarise

T0 = 1_500_000_000.0


def trace(*rows: tuple[float, float, int, str]) -> list[PhillyJob]:
    """(submit offset s, duration s, GPUs, VC) -> jobs named a, b, c, ..."""
    return [PhillyJob(chr(ord("a") + k), T0 + t, d, g, vc) for k, (t, d, g, vc) in enumerate(rows)]


def times(result) -> dict[str, tuple[float | None, float | None]]:
    return {r.src.id: (r.first_start, r.finish) for r in result.runs}


# One node of 8 GPUs; every job takes the whole node.
#   a: submit 0,  100 s;  b: submit 10, 300 s;  c: submit 20, 60 s
THREE = trace((0, 100, 8, "x"), (10, 300, 8, "x"), (20, 60, 8, "y"))


@pytest.mark.parametrize("policy, expected, avg_jct", [
    # FIFO: a 0-100; b 100-400 (JCT 390); c 400-460 (JCT 440); avg (100+390+440)/3 = 310
    ("fifo", {"a": (0, 100), "b": (100, 400), "c": (400, 460)}, 310),
    # SJF (oracle): at 100 c (60 s) goes before b (300 s): c 100-160 (JCT 140),
    # b 160-460 (JCT 450); avg (100+140+450)/3 = 230
    ("sjf", {"a": (0, 100), "b": (160, 460), "c": (100, 160)}, 230),
    ("besteffort", {"a": (0, 100), "b": (100, 400), "c": (400, 460)}, 310),
])
def test_fifo_and_sjf_on_three_jobs(policy, expected, avg_jct):
    result = replay(THREE, policy, ReplayConfig(8, walltime_noise=3))
    assert times(result) == expected
    summary = summarise(result)
    assert summary["jct_avg_h"] * 3600 == pytest.approx(avg_jct)
    assert summary["makespan_h"] * 3600 == pytest.approx(460)
    assert summary["utilisation_avg"] == pytest.approx(1.0)  # the node is never idle


def test_sjf_est_orders_by_the_walltime_estimate_not_the_run_time():
    # One node; a (0-100) holds it while b (100 s) and c (90 s) wait. Estimates are
    # duration x U(1, 3): oracle SJF always takes c first at 100; sjf-est takes the one with
    # the smaller estimate, which for some seeds is b.
    jobs = trace((0, 100, 8, "x"), (1, 100, 8, "x"), (2, 90, 8, "y"))
    flipped = 0
    for seed in range(10):
        cfg = ReplayConfig(8, walltime_noise=3, seed=seed)
        est = replay(jobs, "sjf-est", cfg)
        first = min(est.runs[1:], key=lambda r: r.estimate).src.id
        assert times(est)[first][0] == 100
        assert times(replay(jobs, "sjf", cfg))["c"][0] == 100
        flipped += first == "b"
    assert 0 < flipped < 10


def test_las_preempts_a_job_past_its_threshold_and_resumes_it_with_what_is_left():
    # a: 8 GPUs for 1000 s from 0; it reaches the 3600 GPU-s threshold at 450 s (level 1).
    # b: 8 GPUs, 100 s, arrives at 600 at level 0, so it evicts a: a has run 600 s, 400 s left.
    # b runs 600-700; a resumes at 700 and ends at 700 + 400 = 1100.
    jobs = trace((0, 1000, 8, "x"), (600, 100, 8, "y"))
    result = replay(jobs, "las", ReplayConfig(8))
    assert times(result) == {"a": (0, 1100), "b": (600, 700)}
    assert [r.preemptions for r in result.runs] == [1, 0]
    # with a 30 s restore on resumption, a ends at 700 + 30 + 400 = 1130
    slow = replay(jobs, "las", ReplayConfig(8, restart_overhead_s=30))
    assert times(slow)["a"] == (0, 1130)
    # FIFO never preempts: b waits until 1000
    assert times(replay(jobs, "fifo", ReplayConfig(8)))["b"] == (1000, 1100)


def test_a_las_job_is_preempted_when_it_crosses_its_threshold_while_others_wait():
    # a (8 GPUs, 1000 s) runs from 0; b (8 GPUs, 100 s) arrives at 100 while a is still at
    # level 0 (800 GPU-s per 100 s): b waits. At 450 a reaches 3600 GPU-s: the threshold
    # event lets a cycle evict it; b runs 450-550, a resumes with 550 s left: 550-1100.
    result = replay(trace((0, 1000, 8, "x"), (100, 100, 8, "y")), "las", ReplayConfig(8))
    assert times(result) == {"a": (0, 1100), "b": (450, 550)}


def test_gangs_run_side_by_side_on_two_nodes_and_a_too_big_gang_never_runs():
    # 16 GPUs: a (2 x 8 GPUs) 0-50; b and c (4 GPUs each) wait and run together 50-70.
    # d asks for 32 GPUs on a 16-GPU cluster: it never runs (rejected or left stuck).
    jobs = trace((0, 50, 16, "x"), (1, 20, 4, "x"), (2, 20, 4, "y"), (3, 10, 32, "y"))
    result = replay(jobs, "besteffort", ReplayConfig(16))
    t = times(result)
    assert (t["a"], t["b"], t["c"]) == ((0, 50), (50, 70), (50, 70))
    assert t["d"] == (None, None)
    assert len(result.rejected) + len(result.stuck) == 1


def test_quotas_put_each_vc_in_its_own_queue():
    # Two VCs with 8 GPUs of nominal quota each and no cohort, on 16 GPUs: x's second job
    # cannot borrow y's idle quota, so it waits for x's first job (0-100) even though 8 GPUs
    # are free: x2 runs 100-200. y's job starts at once.
    jobs = trace((0, 100, 8, "x"), (1, 100, 8, "x"), (2, 100, 8, "y"))
    quotas = parse_quotas({"*": {"gpus": 8}}, ["x", "y"])
    t = times(replay(jobs, "fifo", ReplayConfig(16, quotas=quotas)))
    assert t == {"a": (0, 100), "b": (100, 200), "c": (2, 102)}
    # the same in one cohort: x borrows y's quota until y needs it; b runs 1-101, c waits
    cohort = parse_quotas({"*": {"gpus": 8, "cohort": "all"}}, ["x", "y"])
    t = times(replay(jobs, "fifo", ReplayConfig(16, quotas=cohort)))
    assert t == {"a": (0, 100), "b": (1, 101), "c": (100, 200)}


def test_a_shallow_queue_depth_still_starts_every_job():
    # depth 1: each cycle sees one job per VC; when a cycle starts it, another cycle runs at
    # the same second with the next one, so the 8 one-GPU jobs of x all start at 0
    jobs = trace(*[(0, 10, 1, "x")] * 8)
    result = replay(jobs, "fifo", ReplayConfig(8, depth=1))
    assert {r.first_start for r in result.runs} == {0}
    assert result.cycles == 8


def test_a_blocked_gang_does_not_hide_smaller_jobs_of_its_project_from_sjf():
    # 16 GPUs, depth 1. a (x, 8 GPUs, 0-1000) holds one node. b (x, 16 GPUs, 100 s) is x's
    # shortest job but cannot start before a ends; c (x, 1 GPU, 500 s) is longer than b.
    # Pending jobs are listed per (VC, gang size), so c is shown beside b and starts at 2 on
    # the free node (were x one list, depth 1 would show only b, and c would start at 1100).
    # d (y, 1 GPU) starts at 3. b waits for a, c and d to be gone: 1000-1100.
    jobs = trace((0, 1000, 8, "x"), (1, 100, 16, "x"), (2, 500, 1, "x"), (3, 800, 1, "y"))
    t = times(replay(jobs, "sjf", ReplayConfig(16, depth=1)))
    assert t == {"a": (0, 1000), "b": (1000, 1100), "c": (2, 502), "d": (3, 803)}


def test_walltime_estimates_are_seeded_and_at_least_the_run_time():
    jobs = trace((0, 100, 8, "x"), (1, 100, 8, "x"))
    a = replay(jobs, "easy", ReplayConfig(8, walltime_noise=2, seed=7))
    b = replay(jobs, "easy", ReplayConfig(8, walltime_noise=2, seed=7))
    assert [r.estimate for r in a.runs] == [r.estimate for r in b.runs]
    assert all(100 <= r.estimate <= 200 for r in a.runs)


@pytest.mark.parametrize("kwargs, field", [
    ({"gpus": 12}, "gpus"), ({"gpus": 0}, "gpus"), ({"gpus": 8, "depth": 0}, "depth"),
    ({"gpus": 8, "walltime_noise": 0.5}, "walltime_noise"),
    ({"gpus": 8, "restart_overhead_s": -1}, "restart_overhead"),
])
def test_bad_settings_are_named(kwargs, field):
    with pytest.raises(InvalidSpec) as err:
        ReplayConfig(**kwargs)
    assert err.value.field == field


def test_an_unknown_policy_is_named():
    with pytest.raises(InvalidSpec, match="unknown replay policy 'srpt'"):
        replay(THREE, "srpt", ReplayConfig(8))


@pytest.mark.parametrize("values, expected", [
    ([1, 1, 1, 1], 1.0),          # everyone alike
    ([1, 0, 0, 0], 0.25),         # (1)^2 / (4 * 1) = 1/n
    ([1, 3], 0.8),                # (1+3)^2 / (2 * (1+9)) = 16/20
    ([2, 4, 6], 0.857142857),     # 12^2 / (3 * 56) = 144/168
    ([0, 0], 1.0),
])
def test_jains_index(values, expected):
    assert jain(values) == pytest.approx(expected)


def test_nearest_rank_percentiles_and_time_weighted_utilisation():
    assert percentile([5, 1, 3, 2, 4], 50) == 3       # ceil(2.5) = 3rd of 1..5
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile([7], 99) == 7
    # 8 GPUs: 4 held 0-10, 8 held 10-20, none after: (4*10 + 8*10) / (8*20) = 0.75
    assert mean_utilisation([(0, 4), (10, 8), (20, 0)], 8, 20) == pytest.approx(0.75)
