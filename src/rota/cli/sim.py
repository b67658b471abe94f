"""``rota sim``: simulations on real cluster traces. ``rota sim pack`` runs the packing
experiment of "Beware of Fragmentation" (ATC '23) on the Alibaba GPU-sharing trace (docs/simulator.md);
``rota sim replay`` replays the Philly trace (docs/replay.md); ``rota sim cohost`` runs
Kubernetes pods and Slurm gangs on the same nodes at four grains of sharing
(docs/cohosting.md); ``rota sim elastic`` (``rota.cli.sim_elastic``) compares node-only
autoscaling with rota's elastic planner and a GPU pool (docs/elastic.md); ``rota sim mix``
(``rota.cli.sim_mix``) runs training, notebooks and services under rota's mechanisms one at a
time (docs/efficiency.md).

Seeds run in parallel worker processes (``--jobs``); each run is deterministic for its seed.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import List, Optional

import typer

from rota.cli import simflags
from rota.core import InvalidSpec

sim_app = typer.Typer(help="Simulate policies on real cluster traces (docs/simulator.md).",
                      no_args_is_help=True)

ALIBABA = "alibaba-gpu-v2023"  # rota.simulator.fetch.TRACES
NODES = "openb_node_list_gpu_node.csv"
PODS = "openb_pod_list_default.csv"

PACK_HELP = (
    "Replay a pod list onto an empty cluster, one pod at a time and never leaving, with one "
    "placement policy, and report the unallocated GPU % at 100 % arrived workload (mean and sd "
    "over seeds) and the curve of unallocated GPU against arrived workload.\n\n"
    "Example: rota sim pack --policy fgd --seeds 42-51"
)


def parse_seeds(text: str) -> list[int]:
    """``42-51``, ``42,45`` or ``42`` -> seeds (non-negative); raises InvalidSpec naming ``--seeds``."""
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None:
            raise InvalidSpec("--seeds", f"expected seeds such as 42-51 or 42,43, got {text!r}")
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        if hi < lo:
            raise InvalidSpec("--seeds", f"empty range {part.strip()!r}")
        seeds.extend(range(lo, hi + 1))
    return list(dict.fromkeys(seeds))


def _one(nodes, pods, policy: str, seed: int, tune: float, threshold: float):
    from rota.simulator.pack import run
    return run(nodes, pods, policy, seed, tune, threshold)


def _run_all(nodes, pods, policies: list[str], seeds: list[int], tune: float, threshold: float,
             jobs: int, quiet: bool) -> dict[str, list]:
    from rich.progress import Progress

    tasks = [(p, s) for p in policies for s in seeds]
    out: dict[str, list] = {p: [] for p in policies}
    with Progress(disable=quiet, transient=True) as progress:
        bar = progress.add_task("packing runs", total=len(tasks))
        if jobs <= 1:
            for p, s in tasks:
                out[p].append(_one(nodes, pods, p, s, tune, threshold))
                progress.advance(bar)
            return out
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_one, nodes, pods, p, s, tune, threshold) for p, s in tasks]
            for fut in as_completed(futures):
                r = fut.result()
                out[r.policy].append(r)
                progress.advance(bar)
    return out


@sim_app.command("fetch")
def fetch_cmd(
    names: Optional[List[str]] = typer.Argument(None, metavar="[TRACE]...",
                                                help="Traces to download (default: all)."),
    mirror: Optional[str] = typer.Option(None, "--mirror", metavar="URL",
                                         help="Read file NAME of trace T from URL/T/NAME "
                                              "instead of its public source."),
) -> None:
    """Download the public traces rota sim reads, with their licences, into a cache directory
    ($ROTA_TRACES, else ~/.cache/rota/traces); each file's SHA-256 is checked and listed in
    SHA256SUMS."""
    from rota.cli.app import fail
    from rota.simulator.fetch import TRACES, fetch, trace_dir
    unknown = [n for n in names or [] if n not in TRACES]
    if unknown:
        fail("TRACE", InvalidSpec("", f"unknown trace {unknown[0]!r}; known: "
                                      f"{', '.join(TRACES)}"))
    for name in names or list(TRACES):
        trace, into = TRACES[name], trace_dir(name)
        print(f"{name}: {trace.about}", flush=True)
        try:
            fetch(trace, into, mirror, say=lambda text: print(f"  {text}", flush=True))
        except InvalidSpec as exc:
            fail(name, exc)
        print(f"  in {into}", flush=True)


def _trace_file(given: Optional[Path], base: Path, default: str, trace: str) -> Path:
    """``given`` as it is, or as a name in ``base``; else ``base/default``. Missing: the error
    says what to run."""
    from rota.cli.app import fail
    from rota.simulator.fetch import missing
    path = base / default if given is None else given
    if given is not None and not given.exists() and (base / given).exists():
        path = base / given
    if not path.exists():
        exc = missing(trace, path)
        fail(exc.field, InvalidSpec("", exc.reason))
    return path


@sim_app.command("pack", help=PACK_HELP)
def pack(
    trace: Optional[Path] = typer.Option(None, "--trace", metavar="DIR",
                                         help="Directory of the Alibaba trace's CSV files "
                                              "(default: where rota sim fetch puts them)."),
    nodes: Optional[Path] = typer.Option(None, "--nodes", metavar="NODES.csv",
                                         help=f"Node list (CSV; default {NODES})."),
    pods: Optional[Path] = typer.Option(None, "--pods", metavar="PODS.csv",
                                        help=f"Pod list (CSV; default {PODS}); a name alone "
                                             "is looked for in --trace."),
    policy: str = typer.Option("fgd", "--policy", metavar="NAME[,NAME...]",
                               help="random, dotprod, gpuclustering, gpupacking, bestfit, fgd, "
                                    "capgd (rota's own), several separated by commas, or all."),
    seeds: str = typer.Option("42-51", "--seeds", help="Seeds: 42-51, 42,43 or 42."),
    tune: float = typer.Option(1.3, "--tune", help="Workload as a multiple of cluster GPUs."),
    threshold: float = typer.Option(0.95, "--threshold",
                                    help="Share of pods covered by FGD's target workload."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (one object per policy)."),
    plot_to: Optional[Path] = typer.Option(None, "--plot", metavar="FILE.png",
                                           help="Plot the curves to a PNG file."),
    jobs: int = typer.Option(os.cpu_count() or 1, "--jobs", "-j", min=1,
                             help="Worker processes (default: the number of cores)."),
) -> None:
    from rota.cli.app import fail
    from rota.simulator.alibaba import load_nodes, load_pods
    from rota.simulator.fetch import trace_dir
    from rota.simulator.pack import POLICIES
    from rota.simulator.report import plot, summarise

    names = _policy_names(policy, POLICIES)
    base = trace if trace is not None else trace_dir(ALIBABA)
    nodes = _trace_file(nodes, base, NODES, ALIBABA)
    pods = _trace_file(pods, base, PODS, ALIBABA)
    if tune <= 0:
        fail("--tune", InvalidSpec("", f"must be positive, got {tune}"))
    if not 0 < threshold <= 1:
        fail("--threshold", InvalidSpec("", f"must be in (0, 1], got {threshold}"))
    try:
        seed_list = parse_seeds(seeds)
    except InvalidSpec as exc:
        fail("--seeds", InvalidSpec("", exc.reason))
    try:
        node_list = load_nodes(nodes)
    except InvalidSpec as exc:
        fail(str(nodes), exc)
    try:
        pod_list = load_pods(pods)
    except InvalidSpec as exc:
        fail(str(pods), exc)
    runs = _run_all(node_list, pod_list, names, seed_list, tune, threshold, jobs, as_json)
    reports = [summarise(runs[n]) for n in names]
    for rep in reports:
        rep.update({"nodes": str(nodes), "pods_file": str(pods), "tune": tune})
    if plot_to is not None:
        plot(reports, plot_to, title=f"{pods.stem}, tune {tune}, seeds {seeds}")
    if as_json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
        return
    _print(reports, plot_to)


def _print(reports: list[dict], plot_to: Optional[Path]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    head = Table(title="unallocated GPU % at 100 % arrived workload")
    for col in ("policy", "seeds", "mean", "sd", "failed pods (mean)"):
        head.add_column(col, justify="left" if col == "policy" else "right")
    for rep in reports:
        m = rep["unallocated_pct_at_100"] or {"mean": float("nan"), "sd": float("nan")}
        head.add_row(rep["policy"], str(len(rep["seeds"])), f"{m['mean']:.2f}", f"{m['sd']:.2f}",
                     f"{sum(rep['failed']) / len(rep['failed']):.0f}")
    console.print(head)
    curve = Table(title="unallocated GPU % (mean over seeds) by arrived workload %")
    curve.add_column("arrived %", justify="right")
    for rep in reports:
        curve.add_column(rep["policy"], justify="right")
    by_bin = [{p["arrived_pct"]: p["unallocated_pct"] for p in rep["curve"]} for rep in reports]
    for b in list(range(0, 90, 10)) + list(range(90, 101, 2)) + [110, 120, 130]:
        curve.add_row(str(b), *(f"{m[b]:.2f}" if b in m else "-" for m in by_bin))
    console.print(curve)
    if plot_to is not None:
        console.print(f"plot written to {plot_to}")


PHILLY = "philly.csv"  # in rota sim fetch's directory of the trace philly
REPLAY_HELP = (
    "Replay the Philly trace on a cluster of --gpus GPUs (nodes of 8) on a virtual clock, "
    "with rota's scheduler deciding at every arrival and completion, and compare policies: "
    "JCT, queueing delay, slowdown, makespan, utilisation, Jain's fairness (docs/replay.md).\n\n"
    "Example: rota sim replay --gpus 64 --window 2017-10-26..2017-10-27 --plot replay.png"
)


@sim_app.command("replay", help=REPLAY_HELP)
def replay_cmd(
    trace: Optional[Path] = typer.Option(None, "--trace", metavar="PHILLY.csv",
                                         help="Philly job list (default: where rota sim "
                                              "fetch puts it)."),
    gpus: int = typer.Option(64, "--gpus", help="Cluster GPUs (a multiple of 8)."),
    policy: str = typer.Option("all", "--policy", metavar="NAME[,NAME...]",
                               help="fifo, besteffort, easy, besteffort-easy, sjf, sjf-est, "
                                    "sjf-easy, las, fair, fairshare, fair-sjf, fair-sjf-easy, "
                                    "or all."),
    window: Optional[str] = typer.Option(None, "--window", metavar="START..END",
                                         help="Only jobs submitted in [START, END), e.g. "
                                              "2017-10-22..2017-10-29."),
    quotas: Optional[Path] = typer.Option(None, "--quotas", metavar="FILE.yaml",
                                          help="Per-VC queues with quotas (docs/replay.md)."),
    depth: int = typer.Option(16, "--depth", help="Pending jobs per project a cycle sees."),
    noise: float = typer.Option(1.0, "--walltime-noise", metavar="F",
                                help="Walltime estimate = duration x U(1, F)."),
    overhead: float = typer.Option(0.0, "--restart-overhead", metavar="S",
                                   help="Seconds a preempted job needs to restore."),
    seed: int = typer.Option(0, "--seed", help="Seed of the walltime estimates."),
    every: Optional[float] = typer.Option(
        None, "--checkpoint-every", metavar="S", help="Jobs checkpoint every S seconds of run "
        "time; a victim loses the run time since its last checkpoint (default: none lost)."),
    blind: bool = typer.Option(False, "--checkpoint-blind", help="Victim choice does not see "
                               "checkpoint times (it counts from each start)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (one object per policy)."),
    plot_to: Optional[Path] = typer.Option(None, "--plot", metavar="FILE.png",
                                           help="JCT CDF and utilisation plot (PNG)."),
) -> None:
    from rota.cli.app import fail
    from rota.simulator import philly
    from rota.simulator.replay import POLICIES, ReplayConfig, replay
    from rota.simulator.replay_metrics import summarise
    from rota.simulator.replay_report import plot
    from rota.spec import read_yaml

    from rota.simulator.fetch import trace_dir
    names = _policy_names(policy, POLICIES)
    trace = _trace_file(trace, trace_dir("philly"), PHILLY, "philly")
    try:
        jobs = philly.load(trace)
    except InvalidSpec as exc:
        fail(str(trace), exc)
    if window is not None:
        try:
            jobs = philly.within(jobs, *philly.parse_window(window))
        except InvalidSpec as exc:
            fail("--window", InvalidSpec("", exc.reason))
        if not jobs:
            fail("--window", InvalidSpec("", f"no job was submitted in {window}"))
    queues = None
    if quotas is not None:
        try:
            queues = philly.parse_quotas(read_yaml(quotas), sorted({j.vc for j in jobs}))
        except InvalidSpec as exc:
            fail(str(quotas), exc)
    try:
        config = ReplayConfig(gpus, depth, noise, overhead, seed, queues, every, not blind)
    except InvalidSpec as exc:
        fail("--" + exc.field.replace("_", "-"), InvalidSpec("", exc.reason))
    results = [replay(jobs, name, config) for name in names]
    reports = [summarise(r) for r in results]
    if plot_to is not None:
        plot(results, plot_to, title=f"Philly {window or 'Sep-Oct 2017'}, {gpus} GPUs")
    if as_json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2))
        return
    _print_replay(reports, plot_to)


WIDE_REPLAY_TABLE = 150  # terminal columns from which the replay table has a row per policy


def _print_replay(reports: list[dict], plot_to: Optional[Path]) -> None:
    from rich.console import Console
    from rich.table import Table

    from rota.simulator.replay_report import headers, row

    console = Console()
    title = f"replay on {reports[0]['gpus']} GPUs, {reports[0]['jobs']:,} jobs"
    table = Table(title=title)
    rows = [row(rep) for rep in reports]
    if console.width >= WIDE_REPLAY_TABLE:  # a policy per row, as in docs/replay.md
        for k, name in enumerate(headers()):
            table.add_column(name, justify="left" if k == 0 else "right")
        for cells in rows:
            table.add_row(*cells)
    else:  # a policy per column: fourteen columns do not fit a narrow terminal
        table.add_column("", justify="left")
        for cells in rows:
            table.add_column(cells[0], justify="right")
        for k, name in enumerate(headers()[1:], start=1):
            table.add_row(name, *(cells[k] for cells in rows))
    console.print(table)
    if plot_to is not None:
        console.print(f"plot written to {plot_to}")


def _policy_names(option: str, known) -> list[str]:
    """``--policy``: ``all``, or names separated by commas, each one of ``known``."""
    from rota.cli.app import fail

    names = list(known) if option == "all" else [p.strip() for p in option.split(",")]
    for name in names:
        if name not in known:
            fail("--policy", InvalidSpec("", f"unknown policy {name!r}; known: {', '.join(known)}, all"))
    return names


COHOST_HELP = (
    "Run the same mixed workload (Alibaba openb pods as Kubernetes work, Philly gangs as Slurm "
    "work) on the same nodes under a static split, node grain, GPU grain and rota's fraction "
    "grain, and report GPU allocation, queueing delay and JCT per side, mean and sd over seeds "
    "(docs/cohosting.md). Every parameter is in the experiment file; without --config, the "
    "defaults (those of examples/cohosting/experiment.yaml).\n\n"
    "Example: rota sim cohost --config examples/cohosting/experiment.yaml --plot cohost.png"
)


def _cohost_one(exp, pods, gangs, regime: str, seed: int):
    from rota.simulator.cohost import run_seed
    from rota.simulator.cohost_report import summarise
    result = run_seed(exp, pods, gangs, regime, seed)
    summary = summarise(result)
    result.runs = []  # what the plot needs is the allocation series; the runs stay here
    return summary, result


@sim_app.command("cohost", help=COHOST_HELP)
def cohost_cmd(
    config: Optional[Path] = simflags.config_option("docs/cohosting.md"),
    alibaba: Optional[Path] = simflags.ALIBABA_DIR,
    philly_csv: Optional[Path] = simflags.PHILLY_CSV,
    seeds: Optional[str] = simflags.seeds_option("1-3, 1,2 or 1"),
    as_json: bool = simflags.json_option("one object per regime"),
    plot_to: Optional[Path] = simflags.plot_option("Allocation over time and per-side bars"),
    jobs: int = simflags.JOBS,
) -> None:
    from rota.cli.app import fail
    from rota.simulator import philly
    from rota.simulator.alibaba import load_pods
    from rota.simulator.cohost_report import over_seeds
    from rota.simulator.cohost_workload import (
        HOUR, Experiment, gang_rows, parse_experiment, pod_rows,
    )
    from rota.simulator.fetch import trace_dir

    exp = simflags.experiment(config, seeds, Experiment(), parse_experiment)
    pods_file = _trace_file(Path(exp.pods), alibaba if alibaba is not None else trace_dir(ALIBABA),
                            PODS, ALIBABA)
    philly_file = _trace_file(philly_csv, trace_dir("philly"), PHILLY, "philly")
    try:
        pods = pod_rows(load_pods(pods_file), exp.max_run_h * HOUR)
    except InvalidSpec as exc:
        fail(str(pods_file), exc)
    try:
        gangs = gang_rows(philly.load(philly_file), exp.slurm_max_gpus, exp.max_run_h * HOUR)
    except InvalidSpec as exc:
        fail(str(philly_file), exc)
    summaries, results = _cohost_all(exp, pods, gangs, jobs, as_json)
    reports = [over_seeds(summaries[r]) for r in exp.regimes]
    if plot_to is not None:
        from rota.simulator.cohost_report import plot
        plot([results[r][0] for r in exp.regimes], reports, plot_to,
             title=f"{exp.gpus} GPUs ({exp.nodes} nodes), {exp.hours:g} h of arrivals, "
                   f"load {exp.sides['kubernetes'].load:g} pods + {exp.sides['slurm'].load:g} "
                   f"gangs, seeds {', '.join(map(str, exp.seeds))}")
    if as_json:
        print(json.dumps({"experiment": _described(exp), "regimes": reports,
                          "runs": [s for r in exp.regimes for s in summaries[r]]}, indent=2))
        return
    _print_cohost(exp, reports, plot_to)


def _cohost_all(exp, pods, gangs, jobs: int, quiet: bool):
    """Every (regime, seed) run: summaries and results per regime, in seed order."""
    done = simflags.run_all("co-hosting runs", list(exp.regimes), list(exp.seeds), _cohost_one,
                            (exp, pods, gangs), jobs, quiet)
    summaries = {r: [done[r, s][0] for s in exp.seeds] for r in exp.regimes}
    results = {r: [done[r, s][1] for s in exp.seeds] for r in exp.regimes}
    return summaries, results


def _described(exp) -> dict:
    from rota.simulator.cohost_workload import split
    return {"nodes": exp.nodes, "gpus": exp.gpus, "static_kubernetes_nodes": split(exp),
            "hours": exp.hours, "max_run_h": exp.max_run_h, "seeds": list(exp.seeds),
            "pods": exp.pods, "slurm_max_gpus": exp.slurm_max_gpus,
            "sides": {name: {"load": side.load, "policy": dict(side.policy)}
                      for name, side in exp.sides.items()}}


def _print_cohost(exp, reports: list[dict], plot_to: Optional[Path]) -> None:
    from rota.simulator.cohost_report import headers, row
    from rota.simulator.cohost_workload import split
    simflags.print_table(f"co-hosting on {exp.gpus} GPUs ({exp.nodes} nodes; static split "
                         f"{split(exp)} Kubernetes / {exp.nodes - split(exp)} Slurm), mean ± sd "
                         f"over {len(exp.seeds)} seed{'s' if len(exp.seeds) > 1 else ''}",
                         headers(), [row(rep) for rep in reports], plot_to)


# rota sim elastic, mix, data and mig: their commands live in rota.cli.sim_elastic, sim_mix,
# sim_data and sim_mig
from rota.cli import sim_data, sim_mig, sim_mix  # noqa: E402 (they read this module's helpers)
from rota.cli.sim_elastic import register as _register_elastic  # noqa: E402

_register_elastic(sim_app)
sim_mix.register(sim_app)
sim_data.register(sim_app)
sim_mig.register(sim_app)
