"""A start estimate for every pending job (``rota.scheduler.forecast``): a forward simulation
of the cycle over walltimes, as ``squeue --start``. Each case states the cluster, what ends
when, and the estimate with the arithmetic in a comment.

Cluster of ``_busy``: n1 has 8 GPUs; r1 holds GPUs 0-3 until t=100, r2 holds 4-5 until t=300
(or for ever, without a walltime); 6-7 are free. ``big`` (priority 10) wants all 8."""

from __future__ import annotations

import pytest

from builders import cluster, job, node, queue
from rota.scheduler import build_policy
from rota.scheduler.forecast import Estimate, Holder, Horizon, forecast

EASY = build_policy({"preset": "default", "placement": "binpack"})


def _busy(*pending, r2_walltime: float | None = 300):
    r2 = job("r2").gpus(2).running_on(("n1", [4, 5]), since=0)
    return cluster().nodes(node("n1").gpus(8)).jobs(
        job("r1").gpus(4).walltime(100).running_on(("n1", [0, 1, 2, 3]), since=0),
        r2.walltime(r2_walltime) if r2_walltime is not None else r2,
        job("big").gpus(8).priority(10).walltime(1000).submitted(0), *pending).build()


def test_every_pending_job_gets_a_start_even_behind_the_reservation():
    snap = _busy(job("second").gpus(6).priority(5).walltime(1000).submitted(1),
                 job("small").gpus(2).priority(1).walltime(50).submitted(2))
    out = forecast(snap, EASY, 10.0)
    # small: GPUs 6-7 are free now and it ends (10 + 50) before big's start: it starts now
    assert out["small"] == Estimate("small", 10.0)
    # big: all 8 GPUs once r2 ends at 300 (r1 at 100, small at 60); latest end first
    assert out["big"] == Estimate("big", 300.0, "", (
        Holder("r2", ("n1",), 300.0, True), Holder("r1", ("n1",), 100.0, True),
        Holder("small", ("n1",), 60.0, False)))
    # second: at 100 six GPUs are free, but it would end (1100) after big's start (300) on
    # big's GPUs; behind big, which holds every GPU from 300 to 300 + 1000 (and is the last
    # to hold each of the GPUs it gets)
    assert out["second"] == Estimate("second", 1300.0, "", (
        Holder("big", ("n1",), 1300.0, False),))


def test_a_job_behind_one_without_walltime_has_no_estimate_and_names_it():
    out = forecast(_busy(r2_walltime=None), EASY, 10.0)
    # r1 ends at 100, but r2 never does: 6 GPUs is all big could ever get
    assert out["big"] == Estimate("big", None, "no-walltime", (
        Holder("r2", ("n1",), None, True),))


@pytest.mark.parametrize("extra,horizon,job_id,why", [
    # 16 GPUs on one node: no node has them, the cycle rejects it
    (job("huge").gpus(16).submitted(1), Horizon(), "huge", "never"),
    # only the first waiting job in order (big) is simulated
    (job("second").gpus(6).priority(5).submitted(1), Horizon(max_jobs=1), "second", "depth"),
    # big's start (300) is more than 200 s after now (10)
    (None, Horizon(window_s=200), "big", "window"),
    # one cycle only: big is still waiting after it
    (None, Horizon(steps=1), "big", "steps"),
], ids=["never", "depth", "window", "steps"])
def test_when_no_estimate_is_possible_it_says_why(extra, horizon, job_id, why):
    snap = _busy(*(() if extra is None else (extra,)))
    assert forecast(snap, EASY, 10.0, horizon)[job_id] == Estimate(job_id, None, why)


def test_ends_close_together_are_one_step_and_the_start_is_the_last_of_them():
    # r1 ends at 100, r2 at 130: within the 60 s resolution, one step whose time is 130
    snap = _busy(r2_walltime=130)
    assert forecast(snap, EASY, 10.0)["big"].start == 130.0
    # with a 10 s resolution the same: nothing fits at 100, the next step is 130
    assert forecast(snap, EASY, 10.0, Horizon(resolution_s=10))["big"].start == 130.0


def test_a_job_held_by_quota_is_told_the_jobs_whose_end_gives_it_back():
    snap = cluster().nodes(node("n1").gpus(8)).queue(queue("q").quota(gpu=4)).jobs(
        job("a").gpus(4).queue("q").walltime(500).running_on(("n1", [0, 1, 2, 3]), since=0),
        job("b").gpus(2).queue("q").walltime(100).submitted(1)).build()
    # 4 GPUs free, but q's quota of 4 is used by a until 500
    out = forecast(snap, EASY, 0.0)
    assert out["b"].start == 500.0 and [h.job for h in out["b"].holders] == ["a"]


def test_a_step_further_ahead_spans_a_tenth_of_its_distance_from_now():
    # now 10; r1 holds GPUs 0-3 until 1000, r2 holds 4-7 until 1090: 90 s apart, more than
    # the 60 s resolution but within a tenth of (1000 - 10) = 99 s: one step, at 1090
    snap = cluster().nodes(node("n1").gpus(8)).jobs(
        job("r1").gpus(4).walltime(1000).running_on(("n1", [0, 1, 2, 3]), since=0),
        job("r2").gpus(4).walltime(1090).running_on(("n1", [4, 5, 6, 7]), since=0),
        job("four").gpus(4).walltime(100).submitted(0)).build()
    assert forecast(snap, EASY, 10.0)["four"].start == 1090.0
    # without the spread, r1's end is a step of its own: four starts then
    assert forecast(snap, EASY, 10.0, Horizon(spread=0))["four"].start == 1000.0


def test_a_job_its_quota_can_never_allow_says_so():
    # q's nominal quota is 4 GPUs, without a cohort to borrow from: 6 GPUs never fit in it
    snap = cluster().nodes(node("n1").gpus(8)).queue(queue("q").quota(gpu=4)).jobs(
        job("six").gpus(6).queue("q").walltime(100).submitted(1)).build()
    assert forecast(snap, EASY, 0.0)["six"] == Estimate("six", None, "never-quota")


def test_a_job_no_node_will_ever_have_room_for_says_so():
    # work outside rota holds 4 of n1's 8 GPUs and never ends: 6 GPUs never fit there
    snap = cluster().nodes(node("n1").gpus(8).held_by("slurm-job-7", gpus=[0, 1, 2, 3])).jobs(
        job("six").gpus(6).walltime(100).submitted(1)).build()
    assert forecast(snap, EASY, 0.0)["six"] == Estimate("six", None, "never-room")
