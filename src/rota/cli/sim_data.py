"""``rota sim data``: jobs that share datasets, placed data-obliviously, with Fluid-style
dataset affinity (soft and required) and by rota's time to first batch (docs/datasets.md).

Runs of (regime, seed) go to ``--jobs`` worker processes; each is deterministic for its seed.
``register`` adds the command to ``rota sim``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from rota.cli import simflags

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
    config: Optional[Path] = simflags.config_option("docs/datasets.md"),
    seeds: Optional[str] = simflags.seeds_option("1-10, 1,2 or 1"),
    as_json: bool = simflags.json_option("one object per regime"),
    plot_to: Optional[Path] = simflags.plot_option("Bars per regime"),
    jobs: int = simflags.JOBS,
) -> None:
    from rota.simulator.data_report import marks, over_seeds
    from rota.simulator.data_workload import described

    from rota.simulator.data_workload import Experiment, parse_experiment
    exp = simflags.experiment(config, seeds, Experiment(), parse_experiment)
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


def _all(exp, jobs: int, quiet: bool) -> dict[str, list[dict]]:
    """Every (regime, seed) run's summary, per regime in seed order."""
    done = simflags.run_all("datasets runs", list(exp.regimes), list(exp.seeds), _one, (exp,),
                            jobs, quiet)
    return {r: [done[r, s] for s in exp.seeds] for r in exp.regimes}


def _print(exp, reports: list[dict], verdict: dict | None, plot_to: Optional[Path]) -> None:
    from rich.console import Console

    from rota.simulator.data_report import HEADERS, row

    simflags.print_table(f"jobs sharing datasets on {exp.gpus} GPUs, mean ± sd over "
                         f"{len(exp.seeds)} seed{'s' if len(exp.seeds) > 1 else ''}",
                         ["regime", *HEADERS], [row(rep) for rep in reports], None)
    console = Console()
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
