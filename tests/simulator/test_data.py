"""The datasets experiment (``rota sim data``): its file checked field by field, a seed's
workload, runs on ``run_cycle`` where rota waits for a warm node a copy would cost more than,
and the command's JSON, table, plot and marks."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from rota.cli.main import app
from rota.core import InvalidSpec
from rota.simulator.data import simulate
from rota.simulator.data_report import marks, over_seeds, summarise
from rota.simulator.data_workload import GB, DataJob, Workload, parse_experiment, workload

SMALL = {"seeds": [1, 2], "cluster": {"nodes": 2, "cache_tb": 1},
         "datasets": {"count": 5, "max_gb": 200}, "jobs": {"count": 40, "gpus_16": 0}}


@pytest.mark.parametrize("data,field", [
    ({"jobs": {"load": 0}}, "jobs.load"),
    ({"jobs": {"speed": 1}}, "jobs.speed"),
    ({"cluster": {"nodes": 1.5}}, "cluster.nodes"),
    ({"datasets": {"min_gb": 20, "max_gb": 10}}, "datasets.max_gb"),
    ({"regimes": ["rota", "fast"]}, "regimes"),
    ({"seeds": []}, "seeds"),
    ({"cache": 1}, "cache"),
])
def test_a_bad_experiment_names_the_field(data, field):
    with pytest.raises(InvalidSpec) as caught:
        parse_experiment(data)
    assert caught.value.field == field


def test_a_seed_draws_the_same_workload_and_popular_datasets_are_named_most():
    exp = parse_experiment({"datasets": {"count": 20}, "jobs": {"count": 2000}})
    first, again = workload(exp, 7), workload(exp, 7)
    assert first == again and workload(exp, 8) != first
    named = Counter(j.dataset for j in first.jobs)
    # Zipf with exponent 1: rank 1 is named about twice as often as rank 2, 10x rank 10
    assert named["ds001"] > named["ds002"] > named["ds010"]
    assert all(10 * GB <= s <= 1500 * GB for s in first.sizes.values())
    assert all(a.submit < b.submit for a, b in zip(first.jobs, first.jobs[1:]))


def _two_jobs() -> tuple:
    # 125 GB at 10 Gbit/s: a copy takes 100 s. Job 1 (8 GPUs) copies it to n00 and ends at
    # 130; job 2 (8 GPUs, same dataset) arrives at 50 while n00 is busy
    exp = parse_experiment({"cluster": {"nodes": 2}})
    load = Workload({"ds001": 125 * GB}, (DataJob("1", 0.0, 8, 30.0, "ds001"),
                                          DataJob("2", 50.0, 8, 30.0, "ds001")))
    return exp, load


def test_rota_waits_for_the_warm_node_that_frees_before_a_copy_would_end():
    exp, load = _two_jobs()
    rota = simulate(exp, load, "rota", 1).outcomes["2"]
    # it waits 80 s (less than the 100 s copy), then reads the cache: JCT 80 + 30
    assert (rota.start, rota.first, rota.end, rota.hit, rota.copied) == (
        130.0, 130.0, 160.0, True, 0)
    oblivious = simulate(exp, load, "oblivious", 1).outcomes["2"]
    # starts at once on n01 and copies: JCT 100 + 30
    assert (oblivious.start, oblivious.end, oblivious.hit, oblivious.copied) == (
        50.0, 180.0, False, 125 * GB)
    soft = simulate(exp, load, "fluid-soft", 1).outcomes["2"]
    assert soft.start == 50.0 and not soft.hit
    required = simulate(exp, load, "fluid-required", 1).outcomes["2"]
    assert required.start == 130.0 and required.hit


def test_every_job_ends_and_the_figures_add_up_in_each_regime():
    exp = parse_experiment(SMALL)
    load = workload(exp, 1)
    reports = []
    for regime in exp.regimes:
        result = simulate(exp, load, regime, 1)
        assert sorted(result.outcomes, key=int) == [j.id for j in load.jobs]
        assert all(o.submit <= o.start <= o.first <= o.end for o in result.outcomes.values())
        reports.append(over_seeds([summarise(result)]))
    by = {r["regime"]: r for r in reports}
    assert by["rota"]["copied_tb"] <= by["oblivious"]["copied_tb"]
    verdict = marks(reports)
    assert verdict["jct_vs_oblivious"] == by["oblivious"]["jct_avg_s"] / by["rota"]["jct_avg_s"]


def test_the_command_prints_json_a_table_and_a_plot(tmp_path):
    config = tmp_path / "exp.yaml"
    config.write_text(json.dumps(SMALL))
    png = tmp_path / "d.png"
    args = ["sim", "data", "--config", str(config), "--jobs", "1", "--seeds", "1"]
    res = CliRunner().invoke(app, args + ["--json", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [r["regime"] for r in out["regimes"]] == [
        "oblivious", "fluid-soft", "fluid-required", "rota"]
    assert [(r["regime"], r["seed"]) for r in out["runs"]][-1] == ("rota", 1)
    assert set(out["marks"]) >= {"jct_vs_oblivious", "jct_vs_fluid", "jct_holds", "queue_holds"}
    assert png.stat().st_size > 0
    table = CliRunner().invoke(app, args)
    assert table.exit_code == 0 and "cache hit ratio" in table.output
    assert "(mark 2.5x)" in table.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs: {load: -1}\n")
    res = CliRunner().invoke(app, ["sim", "data", "--config", str(bad), "--jobs", "1"])
    assert res.exit_code != 0 and "jobs.load" in res.output
