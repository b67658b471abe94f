"""Checkpoints in the replay: with an interval, a victim resumes from its last checkpoint and
the run time since is lost (and run again); with checkpoint-aware victim choice the scheduler
sees each running job's ``last_checkpoint_at`` and evicts the one that loses the least.
Times are worked out in the comments."""

from __future__ import annotations

import pytest

from rota.core import InvalidSpec
from rota.simulator.checkpoints import last_checkpoint, saved_progress
from rota.simulator.philly import PhillyJob
from rota.simulator.replay import ReplayConfig, replay
from rota.simulator.replay_metrics import summarise

T0 = 1_500_000_000.0


def trace(*rows: tuple[float, float, int, str]) -> list[PhillyJob]:
    return [PhillyJob(chr(ord("a") + k), T0 + t, d, g, vc) for k, (t, d, g, vc) in enumerate(rows)]


def times(result) -> dict[str, tuple[float | None, float | None]]:
    return {r.src.id: (r.first_start, r.finish) for r in result.runs}


def test_saved_progress_and_last_checkpoint():
    assert [saved_progress(p, 250) for p in (0, 249.9, 250, 600)] == [0, 0, 250, 500]
    assert last_checkpoint(100, 350, 300) is None          # resumed at 100, first save at 400
    assert last_checkpoint(100, 400, 300) == 400
    assert last_checkpoint(100, 999, 300) == 700
    assert last_checkpoint(100, 1000, 300) == 1000


def test_a_victim_resumes_from_its_last_checkpoint_and_the_rest_is_lost():
    # LAS: a (8 GPUs, 1000 s) from 0; b (8 GPUs, 100 s) arrives at 600 and evicts it (a is past
    # its first threshold). Checkpoints every 250 s: a saved at 500, so 100 s x 8 GPUs are lost
    # and a has 500 s left: b 600-700, a 700-1200. Without an interval nothing is lost: 1100.
    jobs = trace((0, 1000, 8, "x"), (600, 100, 8, "y"))
    result = replay(jobs, "las", ReplayConfig(8, checkpoint_every_s=250))
    assert times(result) == {"a": (0, 1200), "b": (600, 700)}
    assert summarise(result)["lost_gpu_h"] * 3600 == pytest.approx(800)
    plain = replay(jobs, "las", ReplayConfig(8))
    assert times(plain)["a"] == (0, 1100) and summarise(plain)["lost_gpu_h"] == 0


@pytest.mark.parametrize("aware, victim, lost_s", [
    # a started at 0 and saved at 900; b started at 200 and saved at 800. At 1000 a loses
    # 100 s, b 200 s. Aware, the scheduler evicts a; blind, it counts from each start and
    # evicts the most recently started, b.
    (True, "a", 100),
    (False, "b", 200),
])
def test_checkpoint_aware_victim_choice_evicts_the_job_that_loses_least(aware, victim, lost_s):
    jobs = trace((0, 5000, 8, "x"), (200, 5000, 8, "y"), (1000, 50, 8, "z"))
    result = replay(jobs, "las", ReplayConfig(16, checkpoint_every_s=300,
                                              checkpoint_aware=aware))
    evicted = [r.src.id for r in result.runs if r.preemptions]
    assert evicted == [victim]
    assert summarise(result)["lost_gpu_h"] * 3600 == pytest.approx(lost_s * 8)


@pytest.mark.parametrize("every", [0, -5, float("inf")])
def test_a_bad_interval_is_named(every):
    with pytest.raises(InvalidSpec) as err:
        ReplayConfig(8, checkpoint_every_s=every)
    assert err.value.field == "checkpoint_every"
