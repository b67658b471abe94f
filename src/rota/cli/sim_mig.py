"""``rota sim mig``: a static MIG geometry, a twice-daily calendar and the demand-driven
planner on a diurnal workload drawn from the Alibaba and Philly traces (docs/mig.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from rota.cli import simflags
from rota.core import InvalidSpec

MIG_HELP = (
    "Run 64 MIG GPUs (by default) through a diurnal workload (fractional pods of the Alibaba "
    "trace by day, Philly training by night, at their hour-of-day arrivals) under a static "
    "geometry, a twice-daily calendar and the demand-driven planner; report GPU-hours used, "
    "queueing delay and JCT per class, switches, downtime and the cost the planner minimises "
    "(docs/mig.md). Every parameter is in the experiment file; without --config, the defaults "
    "(those of examples/mig/experiment.yaml).\n\n"
    "Example: rota sim mig --config examples/mig/experiment.yaml --jobs 2 --plot mig.png"
)


def register(app: typer.Typer) -> None:
    app.command("mig", help=MIG_HELP)(mig_cmd)


def _one(exp, sources, regime: str, seed: int):
    from rota.simulator.mig import simulate
    from rota.simulator.mig_report import summarise
    from rota.simulator.mig_workload import expected_per_hour, workload

    result = simulate(exp, workload(exp, sources, seed), expected_per_hour(exp, sources),
                      regime, seed)
    return summarise(result), result


def mig_cmd(
    config: Optional[Path] = simflags.config_option("docs/mig.md"),
    alibaba: Optional[Path] = simflags.ALIBABA_DIR,
    philly_csv: Optional[Path] = simflags.PHILLY_CSV,
    seeds: Optional[str] = simflags.seeds_option("1-3, 1,2 or 1"),
    as_json: bool = simflags.json_option("the experiment, one object per regime, every run"),
    plot_to: Optional[Path] = simflags.plot_option(
        "Jobs pending and GPUs in MIG mode over time (first seed) and the cost per regime"),
    jobs: int = simflags.JOBS,
) -> None:
    from rota.cli.app import fail
    from rota.cli.sim import ALIBABA, PHILLY, PODS, _trace_file
    from rota.simulator import philly
    from rota.simulator.alibaba import load_pods
    from rota.simulator.fetch import trace_dir
    from rota.simulator.mig import table
    from rota.simulator.mig_report import gains, over_seeds, plot
    from rota.simulator.mig_workload import (
        Experiment, fractional_source, parse_experiment, training_source,
    )

    exp = simflags.experiment(config, seeds, Experiment(), parse_experiment)
    pods_file = _trace_file(None, alibaba if alibaba is not None else trace_dir(ALIBABA),
                            PODS, ALIBABA)
    philly_file = _trace_file(philly_csv, trace_dir("philly"), PHILLY, "philly")
    try:
        sources = (fractional_source(load_pods(pods_file), exp),
                   training_source(philly.load(philly_file), exp))
        table(exp)
    except InvalidSpec as exc:
        fail(str(config or "experiment"), exc)
    done = simflags.run_all("MIG runs", list(exp.regimes), list(exp.seeds), _one, (exp, sources),
                            jobs, as_json)
    reports = [over_seeds([done[r, s][0] for s in exp.seeds]) for r in exp.regimes]
    if plot_to is not None:
        plot([done[r, exp.seeds[0]][1] for r in exp.regimes], reports, plot_to,
             title=f"{exp.nodes * exp.gpus_per_node} {exp.gpu_model}, {exp.days} days; "
                   f"series of seed {exp.seeds[0]}")
    if as_json:
        print(json.dumps({"experiment": _described(exp), "regimes": reports,
                          "gains": gains(reports),
                          "runs": [done[r, s][0] for r in exp.regimes for s in exp.seeds]},
                         indent=2))
        return
    _print(exp, reports, plot_to)


def _described(exp) -> dict:
    from dataclasses import asdict
    out = {k: v for k, v in asdict(exp).items() if k not in ("geometries", "classes")}
    out["classes"] = {k: asdict(v) for k, v in exp.classes.items()}
    out["geometries"] = {k: "whole" if g.whole else [p for p, _ in g.instances]
                         for k, g in exp.geometries.items()}
    return out


def _print(exp, reports: list[dict], plot_to: Optional[Path]) -> None:
    from rich.console import Console

    from rota.simulator.mig_report import cells, gains, headers

    simflags.print_table(f"MIG repartitioning on {exp.nodes * exp.gpus_per_node} "
                         f"{exp.gpu_model}, {exp.days} days, mean ± sd over {len(exp.seeds)} "
                         f"seed{'s' if len(exp.seeds) > 1 else ''}",
                         headers(), [cells(rep) for rep in reports], None)
    console = Console()
    for name, gain in gains(reports).items():
        console.print(f"demand-driven cost {gain:.0%} lower than {name.removeprefix('vs ')}")
    if plot_to is not None:
        console.print(f"plot written to {plot_to}")
