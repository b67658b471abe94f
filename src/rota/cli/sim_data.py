"""``rota sim data``: jobs that share datasets, placed data-obliviously, with Fluid-style
dataset affinity (soft and required) and by rota's time to first batch (docs/datasets.md).

Runs of (regime, seed) go to ``--jobs`` worker processes; each is deterministic for its seed.
``register`` adds the command to ``rota sim``.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Optional

import typer

from rota.core import InvalidSpec

DATA_HELP = (
    "Replay jobs that share datasets (Zipf popularity, log-uniform sizes, Philly-like job "
    "sizes and durations) on nodes with dataset caches, under data-oblivious placement, "
    "Fluid-style soft and required dataset affinity, and rota's placement by time to first "
    "batch; report average JCT, p99 queueing delay, time to first batch, cache hit ratio and "
    "bytes copied, mean and sd over seeds, and whether rota reaches its marks "
    "(docs/datasets.md). Every parameter is in the experiment file; without --config, the "
    "defaults (examples/datasets/experiment.yaml).\n\n"
    "Example: rota sim data --config examples/datasets/experiment.yaml --jobs 2 --plot data.png"
)


def _one(exp, regime: str, seed: int) -> dict:
    from rota.simulator.data import simulate
    from rota.simulator.data_report import summarise
    from rota.simulator.data_workload import workload
    return summarise(simulate(exp, workload(exp, seed), regime, seed))


def data_cmd(
    config: Optional[Path] = typer.Option(None, "--config", metavar="FILE.yaml",
                                          help="The experiment's parameters (docs/datasets.md)."),
    seeds: Optional[str] = typer.Option(None, "--seeds",
                                        help="Seeds instead of the file's: 1-10, 1,2 or 1."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (one object per regime)."),
    plot_to: Optional[Path] = typer.Option(None, "--plot", metavar="FILE.png",
                                           help="Bars per regime."),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", "-j", min=1,
                             help="Worker processes (default: the number of cores)."),
) -> None:
    from rota.simulator.data_report import marks, over_seeds
    from rota.simulator.data_workload import described

    exp = _experiment(config, seeds)
    summaries = _all(exp, jobs, as_json)
    reports = [over_seeds(summaries[r]) for r in exp.regimes]
    verdict = marks(reports)
    if plot_to is not None:
        from rota.simulator.data_report import plot
        c = exp["cluster"]
        plot(reports, plot_to, f"{exp.gpus} GPUs ({c['nodes']:g} nodes, {c['cache_tb']:g} TB "
                               f"cache each), {exp['jobs']['count']:g} jobs, seeds "
                               f"{', '.join(map(str, exp.seeds))}")
    if as_json:
        print(json.dumps({"experiment": described(exp), "regimes": reports, "marks": verdict,
                          "runs": [s for r in exp.regimes for s in summaries[r]]}, indent=2))
        return
    _print(exp, reports, verdict, plot_to)


def _experiment(config: Optional[Path], seeds: Optional[str]):
    from dataclasses import replace

    from rota.cli.app import fail
    from rota.cli.sim import parse_seeds
    from rota.simulator.data_workload import Experiment, parse_experiment
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
    return exp


def _all(exp, jobs: int, quiet: bool) -> dict[str, list[dict]]:
    """Every (regime, seed) run's summary, per regime in seed order."""
    from rich.progress import Progress

    tasks = [(r, s) for r in exp.regimes for s in exp.seeds]
    done: dict = {}
    with Progress(disable=quiet, transient=True) as progress:
        bar = progress.add_task("datasets runs", total=len(tasks))
        if jobs <= 1:
            for r, s in tasks:
                done[r, s] = _one(exp, r, s)
                progress.advance(bar)
        else:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                futures = {pool.submit(_one, exp, r, s): (r, s) for r, s in tasks}
                for fut in as_completed(futures):
                    done[futures[fut]] = fut.result()
                    progress.advance(bar)
    return {r: [done[r, s] for s in exp.seeds] for r in exp.regimes}


def _print(exp, reports: list[dict], verdict: dict | None, plot_to: Optional[Path]) -> None:
    from rich.console import Console
    from rich.table import Table

    from rota.simulator.data_report import HEADERS, row

    console = Console()
    table = Table(title=f"jobs sharing datasets on {exp.gpus} GPUs, mean ± sd over "
                        f"{len(exp.seeds)} seed{'s' if len(exp.seeds) > 1 else ''}")
    table.add_column("", justify="left")
    for rep in reports:
        table.add_column(rep["regime"], justify="right")
    rows = [row(rep) for rep in reports]
    for k, name in enumerate(HEADERS, start=1):
        table.add_row(name, *(cells[k] for cells in rows))
    console.print(table)
    if verdict is not None:
        fluid = (f", {verdict['jct_vs_fluid']:.2f}x the better Fluid-style regime's (mark 1.5x)"
                 if "jct_vs_fluid" in verdict else "")
        console.print(f"rota's average JCT is {verdict['jct_vs_oblivious']:.2f}x better than "
                      f"oblivious (mark 2.5x){fluid}: "
                      f"{'holds' if verdict['jct_holds'] else 'missed'}"
                      f"; p99 queueing delay within oblivious + 5 % "
                      f"({verdict['queue_p99_bound_s']:.0f} s): "
                      f"{'holds' if verdict['queue_holds'] else 'missed'}.")
    if plot_to is not None:
        console.print(f"plot written to {plot_to}")


def register(sim_app: typer.Typer) -> None:
    sim_app.command("data", help=DATA_HELP)(data_cmd)
