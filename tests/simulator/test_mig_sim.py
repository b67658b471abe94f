"""``rota sim mig``: the engine on hand-made workloads, the workload's hour profiles, the
experiment file's errors, and the command on tiny trace files."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from rota.cli.main import app
from rota.core import InvalidSpec
from rota.core.migplan import WHOLE
from rota.simulator.mig import simulate
from rota.simulator.mig_report import gains, over_seeds, summarise
from rota.simulator.mig_workload import (
    Experiment, Source, Work, parse_experiment, pod_shape, profile,
)

SMALL = tuple(("1g.10gb", s) for s in range(7))
# one node of 2 GPUs; a GPU may change once an hour; switches take 60 s
EXP = Experiment(nodes=1, gpus_per_node=2, days=1, drain_h=12, seeds=(1,),
                 min_interval_h=1.0, horizon_h=2.0, plan_every_s=900.0, downtime_s=60.0)
# forecast: whole GPUs, a little all day, so that sizing keeps both GPUs whole
WHOLE_FORECAST = {WHOLE: ([0.5] * 24, 3600.0, "training")}


def one_g(n: int, at: float = 100.0, run: float = 1800.0) -> list[Work]:
    return [Work(f"n{k}", "notebook", at, run, "1g.10gb", 1) for k in range(n)]


def test_demand_driven_repartitions_one_gpu_for_a_burst_of_1g_jobs_and_all_finish():
    work = one_g(5)
    result = simulate(EXP, work, WHOLE_FORECAST, "demand", 1)
    assert all(r.finish is not None for r in result.runs)
    # one GPU switched to 7x1g.10gb at the first tick after the burst (900 s), usable at
    # 960 s; the jobs wait 960 - 100 = 860 s each
    assert result.switches == 1
    assert [r.waited for r in result.runs] == [pytest.approx(860.0)] * 5
    assert result.downtime_gpu_s == pytest.approx(60.0)


def test_static_never_switches_and_a_job_without_its_profile_waits_to_the_end():
    result = simulate(EXP, one_g(1), WHOLE_FORECAST, "static", 1)
    assert result.switches == 0
    assert result.runs[0].finish is None and result.runs[0].start is None
    # it waits from its arrival until the run stops (1 day + 12 h of drain)
    assert result.runs[0].waited == pytest.approx(36 * 3600 - 100)


def test_the_calendar_evicts_preemptible_training_and_it_resumes_from_its_checkpoint():
    # sizing: by day 1g notebooks (forecast 14 an hour, 1 h each, needs 2 GPUs of 7),
    # by night whole GPUs; a training job of 4 h on both GPUs from 07:10 is evicted at
    # 08:00 (it saved at 07:40: 20 min lost) and waits for the night's whole GPUs.
    day = [14.0 if 8 <= h < 20 else 0.0 for h in range(24)]
    night = [1.0 if not 8 <= h < 20 else 0.0 for h in range(24)]
    forecast = {"1g.10gb": (day, 3600.0, "notebook"), WHOLE: (night, 3600.0, "training")}
    train = Work("t0", "training", 7 * 3600.0 + 600, 4 * 3600.0, WHOLE, 2)
    result = simulate(EXP, [train], forecast, "twice-daily", 1)
    run = result.runs[0]
    assert run.evictions == 1
    assert run.lost_gpu_s == pytest.approx(2 * 1200.0)
    # back at 20:00 (and 60 s of downtime): 3.5 h left (50 min ran, 20 min of it lost)
    assert run.finish == pytest.approx(20 * 3600.0 + 60.0 + 3.5 * 3600.0)
    assert run.used_gpu_s == pytest.approx(2 * (3000.0 + 3.5 * 3600.0))


def test_the_calendar_waits_for_a_job_that_may_not_be_preempted():
    # a 1g notebook runs from 19:00 to 22:00 on the day geometry; the 20:00 switch to whole
    # waits for it: its GPU switches at the first tick after 22:00 (22:00 itself)
    day = [14.0 if 8 <= h < 20 else 0.0 for h in range(24)]
    night = [1.0 if not 8 <= h < 20 else 0.0 for h in range(24)]
    forecast = {"1g.10gb": (day, 3600.0, "notebook"), WHOLE: (night, 3600.0, "training")}
    exp = replace(EXP, days=2)
    note = Work("n0", "notebook", 19 * 3600.0, 3 * 3600.0, "1g.10gb", 1)
    result = simulate(exp, [note], forecast, "twice-daily", 1)
    assert result.runs[0].finish == pytest.approx(22 * 3600.0)
    assert result.runs[0].evictions == 0


def test_report_counts_the_weighted_cost_and_gains():
    rep = summarise(simulate(EXP, one_g(5), WHOLE_FORECAST, "demand", 1))
    # 5 notebooks of 1/7 GPU, priority 3, 860 s each; downtime 60 GPU-s
    assert rep["cost"] == pytest.approx((5 * 3 * 860 / 7 + 60) / 3600)
    assert rep["notebook_delay_h"] == pytest.approx(860 / 3600)
    reports = [over_seeds([dict(rep, regime="static", cost=2 * rep["cost"])]), over_seeds([rep])]
    assert gains(reports) == {"vs static": pytest.approx(0.5)}


def test_pod_shapes_and_the_turned_hour_profile():
    assert [pod_shape(m) for m in (50, 143, 160, 300, 500, 571, 810)] == [
        "1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "4g.40gb", WHOLE]
    # all arrivals at trace hours 20..23 and 0..7: the busiest 12 hours begin at 20 and are
    # turned to begin at 8
    items = tuple((h, "notebook", "1g.10gb", 1, 60.0) for h in (*range(20, 24), *range(8)))
    shares = profile(Source(items), 8)
    assert [h for h, s in enumerate(shares) if s > 0] == list(range(8, 20))


@pytest.mark.parametrize("data, field", [
    ({"load": -1}, "load"), ({"nodes": 1.5}, "nodes"), ({"fractional_share": 2},
                                                        "fractional_share"),
    ({"regimes": ["weekly"]}, "regimes"), ({"day_start_h": 24}, "day_start_h"),
    ({"geometries": {"bad": "8x1g.10gb"}}, "geometries.bad"), ({"colour": 1}, "colour"),
    ({"classes": {"notebook": {}}}, "classes"),
])
def test_bad_experiment_names_the_field(data, field):
    with pytest.raises(InvalidSpec) as exc:
        parse_experiment(data)
    assert exc.value.field == field


PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,4000,8192,1,140,,LS,Running,0,1800,0
p1,8000,16384,1,300,,LS,Running,3700,7300,3700
p2,2000,4096,1,1000,,BE,Running,0,50,0
"""
PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 00:00:00,1200,1,1200,x
2017-10-01 03:10:00,3600,4,14400,y
"""
CONFIG = """nodes: 1
days: 1
drain_h: 2
load: 0.3
seeds: [1, 2]
"""


def test_the_command_prints_json_per_regime_and_plots(tmp_path):
    (tmp_path / "openb_pod_list_default.csv").write_text(PODS)
    (tmp_path / "philly.csv").write_text(PHILLY)
    (tmp_path / "exp.yaml").write_text(CONFIG)
    png = tmp_path / "m.png"
    args = ["sim", "mig", "--config", str(tmp_path / "exp.yaml"), "--alibaba", str(tmp_path),
            "--philly", str(tmp_path / "philly.csv"), "--jobs", "1"]
    res = CliRunner().invoke(app, args + ["--json", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["experiment"]["nodes"] == 1
    assert [r["regime"] for r in out["regimes"]] == ["static", "twice-daily", "demand"]
    assert [(r["regime"], r["seed"]) for r in out["runs"]] == [
        (g, s) for g in ("static", "twice-daily", "demand") for s in (1, 2)]
    assert set(out["gains"]) == {"vs static", "vs twice-daily"}
    assert png.stat().st_size > 0
    (tmp_path / "exp.yaml").write_text("horizon_h: -2\n")
    bad = CliRunner().invoke(app, args)
    assert bad.exit_code != 0 and "horizon_h" in bad.output
