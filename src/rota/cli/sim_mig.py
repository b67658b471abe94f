"""``rota sim mig``: a static MIG geometry, a twice-daily calendar and the demand-driven
planner on a diurnal workload drawn from the Alibaba and Philly traces (docs/mig.md)."""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Optional

import typer

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
    config: Optional[Path] = typer.Option(None, "--config", metavar="FILE.yaml",
                                          help="The experiment's parameters (docs/mig.md)."),
    alibaba: Optional[Path] = typer.Option(None, "--alibaba", metavar="DIR",
                                           help="Directory of the Alibaba trace's CSV files "
                                                "(default: where rota sim fetch puts them)."),
    philly_csv: Optional[Path] = typer.Option(None, "--philly", metavar="PHILLY.csv",
                                              help="Philly job list (default: where rota sim "
                                                   "fetch puts it)."),
    seeds: Optional[str] = typer.Option(None, "--seeds",
                                        help="Seeds instead of the file's: 1-3, 1,2 or 1."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (the experiment, one "
                                                       "object per regime, every run)."),
    plot_to: Optional[Path] = typer.Option(None, "--plot", metavar="FILE.png",
                                           help="Jobs pending and GPUs in MIG mode over time "
                                                "(first seed) and the cost per regime (PNG)."),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", "-j", min=1,
                             help="Worker processes (default: the number of cores)."),
) -> None:
    from dataclasses import replace

    from rota.cli.app import fail
    from rota.cli.sim import ALIBABA, PHILLY, PODS, _trace_file, parse_seeds
    from rota.simulator import philly
    from rota.simulator.alibaba import load_pods
    from rota.simulator.fetch import trace_dir
    from rota.simulator.mig import table
    from rota.simulator.mig_report import gains, over_seeds, plot
    from rota.simulator.mig_workload import (
        Experiment, fractional_source, parse_experiment, training_source,
    )
    from rota.spec import read_yaml

    exp = Experiment()
    if config is not None:
        try:
            exp = parse_experiment(read_yaml(config))
        except InvalidSpec as exc:
            fail(str(config), exc)
    if seeds is not None:
        try:
            exp = replace(exp, seeds=tuple(parse_seeds(seeds)))
        except InvalidSpec as exc:
            fail("--seeds", InvalidSpec("", exc.reason))
    pods_file = _trace_file(None, alibaba if alibaba is not None else trace_dir(ALIBABA),
                            PODS, ALIBABA)
    philly_file = _trace_file(philly_csv, trace_dir("philly"), PHILLY, "philly")
    try:
        sources = (fractional_source(load_pods(pods_file), exp),
                   training_source(philly.load(philly_file), exp))
        table(exp)
    except InvalidSpec as exc:
        fail(str(config or "experiment"), exc)
    done = _runs(exp, sources, jobs)
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


def _runs(exp, sources, jobs: int) -> dict:
    tasks = [(r, s) for r in exp.regimes for s in exp.seeds]
    done: dict = {}
    if jobs <= 1:
        for r, s in tasks:
            done[r, s] = _one(exp, sources, r, s)
        return done
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(_one, exp, sources, r, s): (r, s) for r, s in tasks}
        for fut in as_completed(futures):
            done[futures[fut]] = fut.result()
    return done


def _described(exp) -> dict:
    from dataclasses import asdict
    out = {k: v for k, v in asdict(exp).items() if k not in ("geometries", "classes")}
    out["classes"] = {k: asdict(v) for k, v in exp.classes.items()}
    out["geometries"] = {k: "whole" if g.whole else [p for p, _ in g.instances]
                         for k, g in exp.geometries.items()}
    return out


def _print(exp, reports: list[dict], plot_to: Optional[Path]) -> None:
    from rich.console import Console
    from rich.table import Table

    from rota.simulator.mig_report import cells, gains, headers

    console = Console()
    table = Table(title=f"MIG repartitioning on {exp.nodes * exp.gpus_per_node} "
                        f"{exp.gpu_model}, {exp.days} days, mean ± sd over {len(exp.seeds)} "
                        f"seed{'s' if len(exp.seeds) > 1 else ''}")
    table.add_column("", justify="left")
    rows = [cells(rep) for rep in reports]
    for c in rows:
        table.add_column(c[0], justify="right")
    for k, name in enumerate(headers()[1:], start=1):
        table.add_row(name, *(c[k] for c in rows))
    console.print(table)
    for name, gain in gains(reports).items():
        console.print(f"demand-driven cost {gain:.0%} lower than {name.removeprefix('vs ')}")
    if plot_to is not None:
        console.print(f"plot written to {plot_to}")
