"""``rota sim replay`` on a tiny trace file: JSON figures, the plot, and bad options named."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rota.cli.main import app

TRACE = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 00:00:20,60,8,480,y
2017-10-01 00:00:00,100,8,800,x
2017-10-01 00:00:10,300,8,2400,x
"""


def test_replay_prints_one_json_object_per_policy_and_plots(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(TRACE)
    png = tmp_path / "r.png"
    res = CliRunner().invoke(app, ["sim", "replay", "--trace", str(path), "--gpus", "8",
                                   "--policy", "fifo,sjf", "--json", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    reports = {r["policy"]: r for r in json.loads(res.stdout)}
    # the worked example of test_replay_engine: FIFO 310 s, SJF 230 s on average
    assert round(reports["fifo"]["jct_avg_h"] * 3600) == 310
    assert round(reports["sjf"]["jct_avg_h"] * 3600) == 230
    assert png.stat().st_size > 0


def test_checkpoint_options_report_the_work_lost(tmp_path):
    # LAS on 8 GPUs: a (1000 s) is evicted at 600 by b (test_replay_checkpoints): with a save
    # every 250 s, 100 s x 8 GPUs are lost; with none, nothing is
    path = tmp_path / "t.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                    "2017-10-01 00:00:00,1000,8,8000,x\n2017-10-01 00:10:00,100,8,800,y\n")
    base = ["sim", "replay", "--trace", str(path), "--gpus", "8", "--policy", "las", "--json"]
    for extra, lost in [([], 0), (["--checkpoint-every", "250"], 800),
                        (["--checkpoint-every", "250", "--checkpoint-blind"], 800)]:
        res = CliRunner().invoke(app, base + extra)
        assert res.exit_code == 0, res.output
        assert round(json.loads(res.stdout)["lost_gpu_h"] * 3600) == lost


def test_bad_options_are_named(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(TRACE)
    for args, message in [(["--gpus", "12"], "--gpus: must be a positive multiple of 8"),
                          (["--policy", "srpt"], "--policy: unknown policy 'srpt'"),
                          (["--window", "2018-01-01..2018-01-02"], "--window: no job"),
                          (["--depth", "0"], "--depth: must be at least 1"),
                          (["--checkpoint-every", "0"], "--checkpoint-every: must be > 0")]:
        res = CliRunner().invoke(app, ["sim", "replay", "--trace", str(path), *args])
        assert res.exit_code == 2, res.output
        assert message in res.output


def test_the_table_has_a_policy_per_row_on_a_wide_terminal_and_per_column_on_a_narrow_one(
        tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    path.write_text(TRACE)
    args = ["sim", "replay", "--trace", str(path), "--gpus", "8", "--policy", "fifo,sjf"]
    monkeypatch.setenv("COLUMNS", "80")
    lines = CliRunner().invoke(app, args).output.splitlines()
    header = next(line for line in lines if "fifo" in line)
    assert [c.strip() for c in header.split("┃")] == ["", "", "fifo", "sjf", ""]
    # a metric per row: FIFO 310 s = 0.09 h on average, SJF 230 s = 0.06 h (the worked
    # example of test_replay_engine)
    jct = next(line for line in lines if "JCT avg h" in line)
    assert [c.strip() for c in jct.split("│")] == ["", "JCT avg h", "0.09", "0.06", ""]
    monkeypatch.setenv("COLUMNS", "200")
    lines = CliRunner().invoke(app, args).output.splitlines()
    assert any("JCT avg h" in line and "policy" in line for line in lines)  # one header row
    assert any(line.strip("│ ").startswith("fifo") for line in lines)      # a row per policy
