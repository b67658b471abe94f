"""``rota sim mix``: training gangs, notebooks and inference services on one cluster, under
exclusive whole-GPU FIFO and with each of rota's mechanisms switched on (docs/efficiency.md).

Runs of (configuration, seed) go to ``--jobs`` worker processes; each is deterministic for
its seed. ``register`` adds the command to ``rota sim``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from rota.cli import simflags
from rota.core import InvalidSpec

MIX_HELP = (
    "Run one mixed workload (Philly training gangs, notebook sessions idle most of the time, "
    "inference services with a diurnal request rate) under exclusive whole-GPU FIFO and with "
    "each of rota's mechanisms (fractions, packing, idle reclamation, scale-to-zero, "
    "preemption with checkpoints) switched on in turn and all together; report allocation, "
    "useful utilisation, training JCT, notebook time to start, serving SLO attainment, "
    "GPU-hours and cost, mean and sd over seeds (docs/efficiency.md). Every parameter is in "
    "the experiment file; without --config, the defaults (examples/mix/experiment.yaml).\n\n"
    "Example: rota sim mix --config examples/mix/experiment.yaml --jobs 2 --plot mix.png"
)


def _one(exp, gangs, shares, configuration: str, seed: int):
    from rota.simulator.mix import simulate
    from rota.simulator.mix_report import summarise
    from rota.simulator.mix_workload import workload
    result = simulate(exp, workload(exp, gangs, shares, seed), configuration, seed)
    return summarise(result, exp), result


def mix_cmd(
    config: Optional[Path] = simflags.config_option("docs/efficiency.md"),
    alibaba: Optional[Path] = simflags.ALIBABA_DIR,
    philly_csv: Optional[Path] = simflags.PHILLY_CSV,
    seeds: Optional[str] = simflags.seeds_option("1-10, 1,2 or 1"),
    as_json: bool = simflags.json_option("one object per configuration"),
    plot_to: Optional[Path] = simflags.plot_option(
        "Allocation over time and per-configuration bars"),
    jobs: int = simflags.JOBS,
) -> None:
    exp, gangs, shares = _inputs(config, alibaba, philly_csv, seeds)
    from rota.simulator.mix_config import described
    from rota.simulator.mix_report import gains, over_seeds

    summaries, results = _all(exp, gangs, shares, jobs, as_json)
    reports = [over_seeds(summaries[c]) for c in exp.configurations]
    gains(reports)
    if plot_to is not None:
        from rota.simulator.mix_report import plot
        plot([results[c] for c in exp.configurations], reports, plot_to,
             title=f"{exp.gpus} GPUs ({exp.nodes} nodes), {exp.hours:g} h, measured after "
                   f"{exp.warmup_h:g} h; seeds {', '.join(map(str, exp.seeds))}")
    if as_json:
        print(json.dumps({"experiment": described(exp), "configurations": reports,
                          "runs": [s for c in exp.configurations for s in summaries[c]]},
                         indent=2))
        return
    _print(exp, reports, plot_to)


def _inputs(config, alibaba, philly_csv, seeds):
    from rota.cli.app import fail
    from rota.cli.sim import ALIBABA, PHILLY, PODS, _trace_file
    from rota.simulator import philly
    from rota.simulator.fetch import trace_dir
    from rota.simulator.mix_config import Experiment, parse_experiment
    from rota.simulator.mix_workload import HOUR, gang_rows, service_shares

    exp = simflags.experiment(config, seeds, Experiment(), parse_experiment)
    pods_file = _trace_file(Path(exp.pods), alibaba if alibaba is not None else trace_dir(ALIBABA),
                            PODS, ALIBABA)
    philly_file = _trace_file(philly_csv, trace_dir("philly"), PHILLY, "philly")
    try:
        shares = service_shares(pods_file)
    except (InvalidSpec, KeyError, ValueError) as exc:
        fail(str(pods_file), exc if isinstance(exc, InvalidSpec) else InvalidSpec("", str(exc)))
    training = exp["training"]
    try:
        gangs = gang_rows(philly.load(philly_file), int(training["max_gpus"]),
                          training["max_run_h"] * HOUR)
    except InvalidSpec as exc:
        fail(str(philly_file), exc)
    return exp, gangs, shares


def _all(exp, gangs, shares, jobs: int, quiet: bool):
    """Every (configuration, seed) run: summaries per configuration in seed order, and the
    first seed's result per configuration (for the plot)."""
    done = simflags.run_all("mixed-workload runs", list(exp.configurations), list(exp.seeds),
                            _one, (exp, gangs, shares), jobs, quiet)
    summaries = {c: [done[c, s][0] for s in exp.seeds] for c in exp.configurations}
    results = {c: done[c, exp.seeds[0]][1] for c in exp.configurations}
    return summaries, results


def _print(exp, reports: list[dict], plot_to: Optional[Path]) -> None:
    from rota.simulator.mix_report import headers, row
    simflags.print_table(f"mixed workload on {exp.gpus} GPUs ({exp.nodes} nodes), mean ± sd "
                         f"over {len(exp.seeds)} seed{'s' if len(exp.seeds) > 1 else ''}",
                         headers(), [row(rep) for rep in reports], plot_to)


def register(sim_app: typer.Typer) -> None:
    sim_app.command("mix", help=MIX_HELP)(mix_cmd)
