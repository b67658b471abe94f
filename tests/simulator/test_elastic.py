"""The elastic capacity experiment (``rota.simulator.elastic``): when a job that fits nowhere
starts under each regime, that what was added or attached is given back, the invariants of a
run on the real trace (rebuilt from its runs, attachments and nodes, not from the engine's
books), the experiment file and ``rota sim elastic``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rota.cli.main import app
from rota.core import GpuRequest, InvalidSpec, ReplicaRequest
from rota.simulator import philly
from rota.simulator.elastic import simulate
from rota.simulator.elastic_report import summarise
from rota.simulator.elastic_workload import Experiment, Work, parse_experiment, workload
from rota.spec import read_yaml

ROOT = Path(__file__).resolve().parents[2]
PHILLY = ROOT.parent / "shared/traces/philly-pollux/philly.csv"
SMALL = replace(Experiment(), base_nodes=1, pool_gpus=4, pool_slots=4, walltime_noise=1.0,
                seeds=(1,))


def work(name: str, t: float, run: float, gpus: int) -> Work:
    return Work(name, t, run, run, ReplicaRequest(1000 * gpus, 1024 * gpus, GpuRequest(gpus)))


def test_a_job_that_fits_nowhere_starts_when_pool_gpus_are_attached_and_gives_them_back():
    # a holds the base node's 8 GPUs for 1000 s; b (2 GPUs) arrives at 5 s: the scan at 10 s
    # attaches 2 pool GPUs (ready at 10 + 30 s), sooner than a's end or a node (4-6 min)
    jobs = [work("a", 0, 1000, 8), work("b", 5, 100, 2)]
    res = simulate(SMALL, jobs, "pool", 1)
    starts = {r.work.id: r.start for r in res.runs}
    assert starts == {"a": 0, "b": 40.0}
    assert res.added == [] and len(res.atts) == 2
    # b ends at 140: what was attached for it is detached at the scan then, back 10 s later
    assert [(a.returned) for a in res.atts] == [150.0, 150.0]
    assert res.double_attaches == 0


def test_node_only_autoscaling_starts_it_when_a_node_is_up_and_removes_the_node_later():
    jobs = [work("a", 0, 1000, 8), work("b", 5, 100, 2)]
    res = simulate(SMALL, jobs, "node-only", 1)
    b = next(r for r in res.runs if r.work.id == "b")
    [node] = res.added
    assert node.asked == 10.0 and 250.0 <= node.ready_at <= 370.0
    assert b.start == node.ready_at
    # empty from b's end; removed 600 s later (and 600 s after the scale-up), on the scan grid
    assert node.removed is not None and node.removed >= b.finish + 600
    assert node.removed - (b.finish + 600) < SMALL.scan_s
    assert res.atts == []


def test_a_job_waits_when_its_estimated_start_is_sooner_than_any_capacity():
    # a ends at 20 s (its walltime says so): b waits for it rather than attach at 40 s
    res = simulate(SMALL, [work("a", 0, 20, 8), work("b", 5, 100, 8)], "pool", 1)
    assert {r.work.id: r.start for r in res.runs} == {"a": 0, "b": 20.0}
    assert res.atts == [] and res.added == []


@pytest.fixture(scope="module")
def trace_runs():
    if not PHILLY.exists():
        pytest.skip(f"the Philly trace is not at {PHILLY}")
    exp = replace(Experiment(), hours=6.0, seeds=(1,))  # the day's first burst
    work_ = workload(exp, philly.load(PHILLY), 1)
    return exp, {r: simulate(exp, work_, r, 1) for r in exp.regimes}


@pytest.mark.parametrize("regime", ["node-only", "pool"])
def test_invariants_of_a_run_on_the_trace(trace_runs, regime):
    exp, runs = trace_runs
    res = runs[regime]
    assert all(r.start is not None and r.finish is not None for r in res.runs)
    held: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for r in res.runs:
        for rep in r.job.placement.replicas:
            for d in rep.devices:
                held.setdefault((rep.node, d.index), []).append((r.start, r.finish))
    for key, spans in held.items():  # a whole GPU held by one job at a time
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), key
    for r in res.runs:  # a job runs on a pool GPU only while it is attached there
        for rep in r.job.placement.replicas:
            for d in rep.devices:
                if d.index >= exp.node_gpus:
                    assert any(a.node == rep.node and a.device == d.index
                               and a.ready_at <= r.start and r.finish <= a.detached
                               for a in res.atts), (r.work.id, rep.node, d.index)
    for n in res.added:  # nothing runs on a node before it is up or after it is removed
        on = [r for r in res.runs if n.node in r.job.placement.nodes]
        assert all(n.ready_at <= r.start and r.finish <= n.removed for r in on)
        assert n.removed is not None
    assert all(a.returned is not None for a in res.atts)
    assert res.double_attaches == 0


def test_the_pool_starts_the_bursts_jobs_sooner_with_fewer_node_hours(trace_runs):
    _, runs = trace_runs
    node_only, pool = summarise(runs["node-only"]), summarise(runs["pool"])
    assert pool["wait_p50_s"] < node_only["wait_p50_s"]
    assert pool["gpu_node_hours"] < node_only["gpu_node_hours"]
    assert pool["attaches"] > 0 and node_only["attaches"] == 0
    assert pool["double_attaches"] == 0


# -- the experiment file and the command ---------------------------------------------------

def test_the_example_file_holds_the_defaults():
    assert parse_experiment(read_yaml(ROOT / "examples/elastic/experiment.yaml")) == Experiment()


@pytest.mark.parametrize("data, field", [
    ({"pool_gpu": 3}, "pool_gpu"),
    ({"attach_s": -1}, "attach_s"),
    ({"node_start_s": [360, 240]}, "node_start_s"),
    ({"max_gpus": 16}, "max_gpus"),
    ({"regimes": ["cloud"]}, "regimes"),
    ({"start": "yesterday"}, "start"),
    ({"walltime_noise": 0.5}, "walltime_noise"),
])
def test_bad_experiment_values_are_named(data, field):
    with pytest.raises(InvalidSpec) as exc:
        parse_experiment(data)
    assert exc.value.field == field


TRACE = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 00:00:00,1200,8,9600,x
2017-10-01 00:00:30,600,2,1200,x
2017-10-01 00:01:00,600,4,2400,x
2017-10-01 00:02:00,600,1,600,y
"""


def test_rota_sim_elastic_prints_json_and_a_table_and_plots(tmp_path, monkeypatch):
    (tmp_path / "philly.csv").write_text(TRACE)
    (tmp_path / "exp.yaml").write_text(
        'vc: x\nstart: "2017-10-01"\nhours: 1\nbase_nodes: 1\npool_gpus: 4\nseeds: [1, 2]\n')
    args = ["sim", "elastic", "--config", str(tmp_path / "exp.yaml"),
            "--philly", str(tmp_path / "philly.csv")]
    png = tmp_path / "e.png"
    res = CliRunner().invoke(app, args + ["--json", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [r["regime"] for r in out["regimes"]] == ["node-only", "pool"]
    assert [(r["regime"], r["seed"]) for r in out["runs"]] == [
        ("node-only", 1), ("node-only", 2), ("pool", 1), ("pool", 2)]
    assert all(r["jobs"] == 3 and r["stuck"] == 0 for r in out["runs"])  # VC y left out
    assert all(r["double_attaches"] == 0 for r in out["runs"])
    assert png.stat().st_size > 0
    monkeypatch.setenv("COLUMNS", "120")
    res = CliRunner().invoke(app, args + ["--seeds", "3"])
    assert res.exit_code == 0, res.output
    assert "GPU-node-hours" in res.stdout and "double attaches" in res.stdout
    (tmp_path / "bad.yaml").write_text("pool_gpus: 0\n")
    res = CliRunner().invoke(app, ["sim", "elastic", "--config", str(tmp_path / "bad.yaml"),
                                   "--philly", str(tmp_path / "philly.csv")])
    assert res.exit_code != 0 and "pool_gpus" in res.output
