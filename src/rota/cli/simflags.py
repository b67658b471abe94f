"""What the experiments of ``rota sim`` (cohost, elastic, mix) share: their common options,
declared once (each with its command's own words where they differ), reading an experiment's
file with ``--seeds`` in place of its own, running every (case, seed) of an experiment in
worker processes with a progress bar, and printing its table."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, Callable, Hashable, Mapping, Optional, TypeVar

import typer

from rota.core import InvalidSpec

E = TypeVar("E")

ALIBABA_DIR = typer.Option(None, "--alibaba", metavar="DIR",
                           help="Directory of the Alibaba trace's CSV files (default: where "
                                "rota sim fetch puts them).")
PHILLY_CSV = typer.Option(None, "--philly", metavar="PHILLY.csv",
                          help="Philly job list (default: where rota sim fetch puts it).")
JOBS = typer.Option(os.cpu_count() or 1, "--jobs", "-j", min=1,
                    help="Worker processes (default: the number of cores).")


def config_option(doc: str) -> Any:
    return typer.Option(None, "--config", metavar="FILE.yaml",
                        help=f"The experiment's parameters ({doc}).")


def seeds_option(example: str) -> Any:
    return typer.Option(None, "--seeds", help=f"Seeds instead of the file's: {example}.")


def json_option(what: str) -> Any:
    return typer.Option(False, "--json", help=f"Print JSON ({what}).")


def plot_option(what: str) -> Any:
    return typer.Option(None, "--plot", metavar="FILE.png", help=f"{what} (PNG).")


def experiment(config: Optional[Path], seeds: Optional[str], default: E,
               parse: Callable[[Mapping[str, Any]], E]) -> E:
    """The experiment of ``config`` (``default`` without one) with ``seeds`` instead of its
    own; bad input ends the command with an error naming the file or ``--seeds``."""
    from rota.cli.app import fail
    from rota.cli.sim import parse_seeds
    from rota.spec import read_yaml

    exp = default
    if config is not None:
        try:
            exp = parse(read_yaml(config))
        except InvalidSpec as exc:
            fail(str(config), exc)
    if seeds is not None:
        try:
            exp = replace(exp, seeds=tuple(parse_seeds(seeds)))  # type: ignore[type-var]
        except InvalidSpec as exc:
            fail("--seeds", InvalidSpec("", exc.reason))
    return exp


def run_all(label: str, cases: list[Hashable], seeds: list[int], one: Callable[..., Any],
            inputs: tuple, jobs: int, quiet: bool) -> dict[tuple[Hashable, int], Any]:
    """``one(*inputs, case, seed)`` for every case and seed, in ``jobs`` worker processes
    (``one`` must be a module-level function), with a progress bar unless ``quiet``: the
    answers by (case, seed)."""
    from rich.progress import Progress

    tasks = [(c, s) for c in cases for s in seeds]
    done: dict[tuple[Hashable, int], Any] = {}
    with Progress(disable=quiet, transient=True) as progress:
        bar = progress.add_task(label, total=len(tasks))
        if jobs <= 1:
            for c, s in tasks:
                done[c, s] = one(*inputs, c, s)
                progress.advance(bar)
            return done
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(one, *inputs, c, s): (c, s) for c, s in tasks}
            for fut in as_completed(futures):
                done[futures[fut]] = fut.result()
                progress.advance(bar)
    return done


def print_table(title: str, headers: list[str], rows: list[list[str]],
                plot_to: Optional[Path]) -> None:
    """A column per case: each of ``rows`` is one case, its name first, then its figures in
    the order of ``headers[1:]`` (a row of the table each); then where the plot went."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=title)
    table.add_column("", justify="left")
    for cells in rows:
        table.add_column(cells[0], justify="right")
    for k, name in enumerate(headers[1:], start=1):
        table.add_row(name, *(cells[k] for cells in rows))
    console.print(table)
    if plot_to is not None:
        console.print(f"plot written to {plot_to}")
