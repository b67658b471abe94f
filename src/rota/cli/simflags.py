"""What the experiments of ``rota sim`` (cohost, elastic, mix) share: their common options,
declared once (each with its command's own words where they differ), and reading an
experiment's file with ``--seeds`` in place of its own."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, TypeVar

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
