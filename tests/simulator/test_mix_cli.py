"""``rota sim mix`` on tiny trace files: JSON figures per configuration and seed, the plot,
the table, and bad input named."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rota.cli.main import app

PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p0,4000,8192,1,470,,LS,Running,0,1800,0
p1,8000,16384,1,1000,,LS,Running,100,3700,100
p2,2000,4096,1,300,,BE,Running,0,50,0
"""
PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 00:00:00,1200,1,1200,x
2017-10-01 00:10:00,3600,4,14400,y
"""
CONFIG = """nodes: 2
hours: 4
warmup_h: 1
seeds: [1, 2]
configurations: [fifo, fractions, all]
pods: pods.csv
services: {count: 2}
"""


def files(tmp_path, config: str = CONFIG):
    (tmp_path / "pods.csv").write_text(PODS)
    (tmp_path / "philly.csv").write_text(PHILLY)
    (tmp_path / "exp.yaml").write_text(config)
    return ["sim", "mix", "--config", str(tmp_path / "exp.yaml"), "--alibaba", str(tmp_path),
            "--philly", str(tmp_path / "philly.csv"), "--jobs", "1"]


def test_mix_prints_json_per_configuration_and_seed_and_plots(tmp_path):
    png = tmp_path / "m.png"
    res = CliRunner().invoke(app, files(tmp_path) + ["--json", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["experiment"]["gpus"] == 16
    assert [r["configuration"] for r in out["configurations"]] == ["fifo", "fractions", "all"]
    assert [(r["configuration"], r["seed"]) for r in out["runs"]] == [
        ("fifo", 1), ("fifo", 2), ("fractions", 1), ("fractions", 2), ("all", 1), ("all", 2)]
    fifo, fractions, _ = out["configurations"]
    assert fifo["useful_x"] == 1.0
    assert 0 < fifo["alloc"]["mean"] <= 1 and 0 <= fifo["slo"]["mean"] <= 1
    # the services' shares come from the LS pods only (470 or 1000, never the BE pod's 300)
    assert fractions["alloc_services"]["mean"] < fifo["alloc_services"]["mean"]
    assert png.stat().st_size > 0


def test_the_table_has_a_configuration_per_column_and_seeds_replace_the_files(
        tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    res = CliRunner().invoke(app, files(tmp_path) + ["--seeds", "3"])
    assert res.exit_code == 0, res.output
    assert "over 1" in res.stdout and "over 2" not in res.stdout
    for word in ("fifo", "fractions", "all", "useful utilisation", "serving SLO"):
        assert word in res.stdout


def test_a_bad_key_is_named_with_the_file(tmp_path):
    res = CliRunner().invoke(app, files(tmp_path, CONFIG + "notebooks: {gpu_mili: 300}\n"))
    assert res.exit_code != 0
    assert "notebooks.gpu_mili" in res.output and "unknown key" in res.output
