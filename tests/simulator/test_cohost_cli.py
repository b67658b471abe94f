"""``rota sim cohost`` on tiny trace files: JSON figures per regime and seed, the plot, the
table, and bad input named."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rota.cli.main import app

PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,4000,8192,1,500,,LS,Running,0,1800,0
p1,8000,16384,1,1000,,LS,Running,100,3700,100
p2,2000,4096,0,0,,BE,Running,0,50,0
"""
PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 00:00:00,1200,1,1200,x
2017-10-01 00:10:00,3600,4,14400,y
"""
CONFIG = """nodes: 2
hours: 4
warmup_h: 1
seeds: [1, 2]
regimes: [static, fraction]
kubernetes: {load: 0.3, pods: pods.csv}
slurm: {load: 0.5}
"""


def files(tmp_path, config: str = CONFIG):
    (tmp_path / "pods.csv").write_text(PODS)
    (tmp_path / "philly.csv").write_text(PHILLY)
    (tmp_path / "exp.yaml").write_text(config)
    return ["sim", "cohost", "--config", str(tmp_path / "exp.yaml"), "--alibaba", str(tmp_path),
            "--philly", str(tmp_path / "philly.csv"), "--jobs", "1"]


def test_cohost_prints_json_per_regime_and_seed_and_plots(tmp_path):
    png = tmp_path / "c.png"
    res = CliRunner().invoke(app, files(tmp_path) + ["--json", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["experiment"]["gpus"] == 16
    assert out["experiment"]["static_kubernetes_nodes"] == 1  # round(2 x 0.3 / 0.8) = 1
    assert [r["regime"] for r in out["regimes"]] == ["static", "fraction"]
    assert [(r["regime"], r["seed"]) for r in out["runs"]] == [
        ("static", 1), ("static", 2), ("fraction", 1), ("fraction", 2)]
    for report in out["regimes"]:
        assert report["seeds"] == [1, 2]
        for side in ("kubernetes", "slurm"):
            assert report[side]["jobs"]["mean"] > 0
            assert 0 < report[side]["alloc"]["mean"] < 1
    assert png.stat().st_size > 0


def test_seeds_on_the_command_line_replace_the_files_and_the_table_has_a_regime_per_column(
        tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    res = CliRunner().invoke(app, files(tmp_path) + ["--seeds", "3"])
    assert res.exit_code == 0, res.output
    header = next(line for line in res.output.splitlines() if "static" in line and "┃" in line)
    assert [c.strip() for c in header.split("┃")] == ["", "", "static", "fraction", ""]
    assert "over 1 seed" in res.output and "over 1 seeds" not in res.output


def test_bad_input_is_named(tmp_path):
    res = CliRunner().invoke(app, files(tmp_path, CONFIG.replace("load: 0.5", "load: -1")))
    assert res.exit_code == 2, res.output
    assert "exp.yaml: slurm.load: must be > 0, got -1" in res.output
    res = CliRunner().invoke(app, files(tmp_path) + ["--seeds", "x"])
    assert res.exit_code == 2
    assert "--seeds: expected seeds" in res.output
    res = CliRunner().invoke(app, files(tmp_path, CONFIG.replace("pods.csv", "none.csv")))
    assert res.exit_code == 2
    assert "none.csv" in res.output
