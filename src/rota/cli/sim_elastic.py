"""``rota sim elastic``: node-only autoscaling (cluster-autoscaler's behaviour) against rota's
elastic planner with a GPU pool, on a bursty day of the Philly trace (docs/elastic.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from rota.cli import simflags
from rota.core import InvalidSpec

ELASTIC_HELP = (
    "Replay one Philly virtual cluster's day on a small cluster that grows: node-only "
    "autoscaling as cluster-autoscaler does it (4-6 min node start) against rota's planner "
    "with a pool of attachable GPUs and the same node group; report pending-to-running "
    "p50/p95, GPU-node-hours, pool GPU-hours, cost and double attaches (docs/elastic.md). "
    "Every parameter is in the experiment file; without --config, the defaults (those of "
    "examples/elastic/experiment.yaml).\n\n"
    "Example: rota sim elastic --config examples/elastic/experiment.yaml --plot elastic.png"
)


def register(app: typer.Typer) -> None:
    app.command("elastic", help=ELASTIC_HELP)(elastic_cmd)


def elastic_cmd(
    config: Optional[Path] = simflags.config_option("docs/elastic.md"),
    philly_csv: Optional[Path] = simflags.PHILLY_CSV,
    seeds: Optional[str] = simflags.seeds_option("1-3, 1,2 or 1"),
    as_json: bool = simflags.json_option("the experiment, one object per regime, every run"),
    plot_to: Optional[Path] = simflags.plot_option(
        "GPUs provisioned, jobs pending and the pending-to-running distribution"),
) -> None:
    from dataclasses import asdict

    from rota.cli.app import fail
    from rota.cli.sim import PHILLY, _trace_file
    from rota.simulator import philly
    from rota.simulator.elastic import simulate
    from rota.simulator.elastic_report import over_seeds, plot, summarise
    from rota.simulator.elastic_workload import Experiment, parse_experiment, workload
    from rota.simulator.fetch import trace_dir

    exp = simflags.experiment(config, seeds, Experiment(), parse_experiment)
    trace = _trace_file(philly_csv, trace_dir("philly"), PHILLY, "philly")
    try:
        jobs = philly.load(trace)
    except InvalidSpec as exc:
        fail(str(trace), exc)
    runs: dict[str, list[dict]] = {r: [] for r in exp.regimes}
    firsts = []
    for seed in exp.seeds:
        try:
            work = workload(exp, jobs, seed)
        except InvalidSpec as exc:
            fail(str(config or "experiment"), exc)
        for regime in exp.regimes:
            result = simulate(exp, work, regime, seed)
            runs[regime].append(summarise(result))
            if seed == exp.seeds[0]:
                firsts.append(result)
    reports = [over_seeds(runs[r]) for r in exp.regimes]
    if plot_to is not None:
        plot(firsts, plot_to, title=f"Philly VC {exp.vc}, {exp.start}, {exp.hours:g} h; "
                                    f"seed {exp.seeds[0]}")
    if as_json:
        print(json.dumps({"experiment": asdict(exp), "regimes": reports,
                          "runs": [s for r in exp.regimes for s in runs[r]]}, indent=2))
        return
    _print(exp, reports, plot_to)


def _print(exp, reports: list[dict], plot_to: Optional[Path]) -> None:
    from rota.simulator.elastic_report import cells, headers
    simflags.print_table(f"elastic capacity, Philly VC {exp.vc} from {exp.start} "
                         f"({reports[0]['jobs']} jobs), mean ± sd over {len(exp.seeds)} "
                         f"seed{'s' if len(exp.seeds) > 1 else ''}",
                         headers(), [cells(rep) for rep in reports], plot_to)
