"""The demand-driven MIG planner (rota.scheduler.migdemand): small hand-made clusters."""

from __future__ import annotations

import pytest

from rota.core import InvalidSpec
from rota.core.mig import TABLES, geometry_problem
from rota.core.migplan import WHOLE, parse_geometry
from rota.scheduler.migdemand import (
    WHOLE_SLOT, Forecast, GpuNow, Occupant, Pending, SwitchCost, need_and_weight,
    plan_geometries,
)

H100 = next(t for t in TABLES if t.gpu == "H100-80GB")
CANDIDATES = {
    "whole": parse_geometry("whole", WHOLE, "g"),
    "small": parse_geometry("small", "7x1g.10gb", "g"),
    "half": parse_geometry("half", ["4g.40gb", "3g.40gb"], "g"),
}
COST = SwitchCost(downtime_s=60, min_interval_s=3600, horizon_s=4 * 3600)
SMALL = tuple(("1g.10gb", s) for s in range(7))


def whole_gpus(n: int, **kw) -> list[GpuNow]:
    return [GpuNow("n0", k, H100, None, **kw) for k in range(n)]


def switched(targets) -> list[tuple[int, str]]:
    return [(t.gpu, t.geometry) for t in targets if t.geometry is not None]


def test_a_queue_of_1g_jobs_on_whole_free_gpus_repartitions_one_gpu_not_all():
    # 5 jobs of 1g.10gb wait; 4 whole GPUs are free and no whole job is expected.
    # One GPU as 7x1g.10gb serves all 5 (shortage 5 -> 0); a second gains nothing and
    # costs 60 s of downtime, so it stays whole.
    targets = plan_geometries(whole_gpus(4), [Pending("1g.10gb", 5, 600, 1.0)], [],
                              CANDIDATES, COST, now=10_000)
    assert switched(targets) == [(0, "small")]
    assert targets[0].instances == SMALL
    assert geometry_problem(H100, list(targets[0].instances)) is None
    assert [t.why for t in targets[1:]] == ["keep"] * 3


def test_more_1g_demand_than_one_gpu_holds_repartitions_enough_gpus():
    # 10 jobs waiting need ceil(10 / 7) = 2 GPUs of 7x1g.10gb.
    targets = plan_geometries(whole_gpus(4), [Pending("1g.10gb", 10)], [], CANDIDATES, COST,
                              now=0)
    assert [g for g, _ in switched(targets)] == [0, 1]


def test_no_demand_keeps_every_geometry():
    targets = plan_geometries(whole_gpus(3), [], [], CANDIDATES, COST, now=0)
    assert switched(targets) == []


def test_a_gpu_changed_recently_is_not_changed_again():
    # GPU 0 changed 30 min ago (the bound is 1 h): it is too soon; GPU 1 may change.
    gpus = [GpuNow("n0", 0, H100, None, last_change=8_200),
            GpuNow("n0", 1, H100, None, last_change=0)]
    targets = plan_geometries(gpus, [Pending("1g.10gb", 3)], [], CANDIDATES, COST, now=10_000)
    assert targets[0].why == "too-soon" and targets[0].geometry is None
    assert switched(targets) == [(1, "small")]
    # with only the recent one, nothing changes
    alone = plan_geometries(gpus[:1], [Pending("1g.10gb", 3)], [], CANDIDATES, COST, now=10_000)
    assert switched(alone) == [] and alone[0].why == "too-soon"


def test_a_non_preemptible_job_on_an_affected_instance_blocks_the_change():
    # Both GPUs run a whole-GPU job; GPU 0's may not be preempted, GPU 1's may (saved 10 min
    # ago). The 1g queue takes GPU 1, evicting its job.
    gpus = [GpuNow("n0", 0, H100, None, {WHOLE_SLOT: Occupant(None, 600, preemptible=False)}),
            GpuNow("n0", 1, H100, None, {WHOLE_SLOT: Occupant(None, 600, preemptible=True)})]
    targets = plan_geometries(gpus, [Pending("1g.10gb", 7, 3600, 3.0)], [], CANDIDATES, COST,
                              now=0)
    assert switched(targets) == [(1, "small")]
    assert targets[1].evict == (WHOLE_SLOT,)
    only = plan_geometries(gpus[:1], [Pending("1g.10gb", 7, 3600, 3.0)], [], CANDIDATES, COST,
                           now=0)
    assert switched(only) == []


def test_instances_that_stay_may_keep_their_non_preemptible_job():
    # A 4g.40gb holds a job that may not be preempted; 3g.40gb demand can use the other half:
    # from [4g.40gb at 0] the planner may go to [4g.40gb, 3g.40gb] since the 4g stays.
    gpu = GpuNow("n0", 0, H100, (("4g.40gb", 0),),
                 {("4g.40gb", 0): Occupant(None, 0, preemptible=False)})
    targets = plan_geometries([gpu], [Pending("3g.40gb", 1)], [], CANDIDATES, COST, now=0)
    assert switched(targets) == [(0, "half")]
    assert targets[0].evict == ()


def test_switching_back_pays_only_when_the_forecast_outweighs_the_lost_work():
    # One GPU in 7x1g.10gb, idle; whole jobs are forecast at 2 an hour for 4 h, 1 h each:
    # need 2 whole GPUs, supply 0 -> it goes whole.
    gpu = [GpuNow("n0", 0, H100, SMALL)]
    ahead = [Forecast(WHOLE, (2.0,) * 4, 3600.0)]
    assert switched(plan_geometries(gpu, [], ahead, CANDIDATES, COST, now=0)) == [(0, "whole")]
    # with a 1g job that may not be preempted on it, it cannot
    busy = [GpuNow("n0", 0, H100, SMALL, {("1g.10gb", 3): Occupant(None)})]
    assert switched(plan_geometries(busy, [], ahead, CANDIDATES, COST, now=0)) == []


def test_the_need_counts_running_jobs_by_the_share_of_the_horizon_they_still_run():
    # horizon 4 h; a 1g job ending in 2 h counts 0.5, one without an end 1; a forecast of 3
    # an hour for 4 h, 20 min each, counts 12 / 4 h x 20 min = 1.
    gpu = GpuNow("n0", 0, H100, SMALL, {("1g.10gb", 0): Occupant(7200.0),
                                          ("1g.10gb", 1): Occupant(None)})
    need, weight = need_and_weight([gpu], [Pending("1g.10gb", 2, 14_400, 2.0)],
                                   [Forecast("1g.10gb", (3.0,) * 6, 1200.0)], 14_400, 0.0)
    assert need == {"1g.10gb": pytest.approx(0.5 + 1 + 2 + 1)}
    assert weight == {"1g.10gb": pytest.approx(2.0 * (1 + 1))}


def test_a_candidate_invalid_on_the_gpu_is_not_offered():
    a100_40 = next(t for t in TABLES if t.gpu == "A100-40GB")
    # 7x1g.10gb does not fit an A100-40GB (its 1g.10gb takes two memory slices)
    targets = plan_geometries([GpuNow("n0", 0, a100_40, None)], [Pending("1g.10gb", 3)], [],
                              CANDIDATES, COST, now=0)
    assert switched(targets) == []


def test_bad_switch_cost_names_the_field():
    with pytest.raises(InvalidSpec, match="min_interval_s"):
        SwitchCost(downtime_s=1, min_interval_s=-1)
    with pytest.raises(InvalidSpec, match="horizon_s"):
        SwitchCost(downtime_s=1, min_interval_s=0, horizon_s=0)
