"""The Typer app of the ``rota`` command; its subcommands live in their own modules.

``rota.cli.main`` is the entry point: it gives ``ps``, ``logs``, ``run``, ``submit``,
``queues``, ``nodes`` and ``show`` to the small parser of ``rota.cli.fast`` when it knows every
word of the command line, and everything else to this app.

Error convention for every command: bad input (a file, a field, an option value) prints one
line ``error: <file>: <field>: <reason>`` on stderr and exits with status 2; no traceback.
A mistake on the command line itself (an unknown option, a missing argument, a value of the
wrong type) is no different: ``rota.cli.main`` turns click's usage errors into the same one line
(``rota.cli.usage``) instead of a box.

Shell completion is Typer's: ``rota --install-completion SHELL`` (bash, zsh, fish) or
``rota --show-completion SHELL`` to print the script (``rota.cli.usage``).

Start-up time: a command that only talks to a server loads typer, rich and the HTTP client
(``rota.cli.main`` says which commands load none of them).
The scheduler, the file parsers (pydantic), FastAPI, SQLAlchemy and the simulator are imported
inside the commands that use them (``plan``, ``sim``, ``up``, ``submit``, ``show``), never at
the top of a module this one imports; ``bench/cli.py`` measures it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Optional

import typer
from rich.console import Console

from rota import __version__
from rota.core import InvalidSpec
from rota.cli.usage import install_completion, show_completion

if TYPE_CHECKING:
    from rota.scheduler import Policy

# the names of ``rota.scheduler.PRESETS``, for help texts without importing the scheduler
# (tests/cli/test_cli_startup.py checks that they agree)
PRESET_NAMES = ("default", "fifo", "besteffort", "fair", "fairshare", "fair-sjf", "fair-sharing",
                "spread")

app = typer.Typer(
    name="rota",
    help="rota: a GPU cluster scheduler and workload manager for AI teams.\n\n"
         "Queues, quotas, fair share, gang and fractional GPU placement, preemption and "
         "backfill. Start with: rota plan --cluster CLUSTER.yaml --jobs JOBS.yaml",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
)

EXIT_BAD_INPUT = 2


def fail(source: str, exc: InvalidSpec) -> NoReturn:
    """One line per mistake (``rota.spec.errors.SpecErrors`` carries several), then exit 2."""
    for one in getattr(exc, "errors", None) or [exc]:
        parts = ["error", source] + ([one.field] if one.field else []) + [one.reason]
        print(": ".join(parts), file=sys.stderr)
    raise typer.Exit(EXIT_BAD_INPUT)


def _version(value: bool) -> None:
    if value:
        print(f"rota {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show rota's version and exit."),
    install: Optional[str] = typer.Option(None, "--install-completion", metavar="SHELL",
                                          callback=install_completion, is_eager=True,
                                          expose_value=False, help="Install completion for "
                                          "SHELL: bash, zsh or fish."),
    show: Optional[str] = typer.Option(None, "--show-completion", metavar="SHELL",
                                       callback=show_completion, is_eager=True,
                                       expose_value=False, help="Print the completion script "
                                       "for SHELL: bash, zsh or fish."),
) -> None:
    """rota: a GPU cluster scheduler and workload manager for AI teams."""


def resolve_policy(option: Optional[str], cluster_policy: Any) -> Policy:
    """``--policy`` (a preset name or a YAML policy file) wins over the cluster file's."""
    from rota.scheduler import PRESETS, build_policy
    from rota.spec import check_policy, read_yaml

    if option is None:
        return build_policy(cluster_policy if cluster_policy is not None else "default")
    if option in PRESETS:
        return build_policy(option)
    path = Path(option)
    if not path.exists() and not option.endswith((".yaml", ".yml")):
        fail("--policy", InvalidSpec("", f"no preset named {option!r} and no such file; presets: "
                                     f"{', '.join(PRESETS)}"))
    try:
        spec = read_yaml(path)
        if not isinstance(spec, dict):
            raise InvalidSpec("", "expected a policy mapping (order, admission, placement, "
                              "preemption, backfill, preset, seed)")
        check_policy(spec)
    except InvalidSpec as exc:
        fail(option, exc)
    return build_policy(spec)


PLAN_HELP = (
    "Dry-run the scheduler: what would run where, who is preempted, what waits and why.\n\n"
    "Runs scheduling cycles at the cluster file's 'now' until nothing changes, then shows "
    "placements, preemptions, reservations, pending jobs with their reasons and estimated "
    "start, and rejected jobs. Nothing is started.\n\n"
    "Example: rota plan --cluster examples/lab/cluster.yaml --jobs examples/lab/jobs.yaml"
)


@app.command("plan", help=PLAN_HELP)
def plan(
    cluster: Path = typer.Option(..., "--cluster", "-c", metavar="CLUSTER.yaml",
                                 help="Cluster file: nodes, GPUs, flavours, queues, projects, "
                                      "running jobs (docs/files.md)."),
    jobs: Path = typer.Option(..., "--jobs", "-j", metavar="JOBS.yaml",
                              help="Jobs file: the pending jobs to place (docs/files.md)."),
    policy: Optional[str] = typer.Option(
        None, "--policy", "-p", metavar="NAME|FILE",
        help=f"Policy preset ({', '.join(PRESET_NAMES)}) or a YAML policy file; default: the "
             "cluster file's policy, else 'default'."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (docs/plan.md)."),
) -> None:
    from rota.cli.plan import plan_report, run_plan
    from rota.cli.render import render
    from rota.spec import load_cluster, load_jobs

    try:
        loaded = load_cluster(cluster)
    except InvalidSpec as exc:
        fail(str(cluster), exc)
    try:
        pending = load_jobs(jobs, loaded)
    except InvalidSpec as exc:
        fail(str(jobs), exc)
    chosen = resolve_policy(policy, loaded.policy)
    snapshot = loaded.snapshot
    snapshot = type(snapshot)(snapshot.nodes, snapshot.queues, snapshot.jobs + pending,
                              snapshot.projects, snapshot.flavors, snapshot.usage)
    run = run_plan(snapshot, chosen, loaded.now)
    report = plan_report(run, chosen, loaded.now)
    if as_json:
        print(json.dumps(report, indent=2))
        return
    render(report, Console(width=_width()), _hints(run))


def _width() -> int:
    from rota.cli.tables import width
    return width()


def _hints(run) -> list[str]:
    from rota.cli.explain import hint
    seen: dict[str, list[str]] = {}
    reasons = [(w.job, r) for w in run.last.waits for r in w.reasons]
    reasons += [(rj.job, r) for _, rj in run.rejects for r in rj.reasons]
    for job, reason in reasons:
        text = hint(reason)
        if text is not None and job not in seen.setdefault(text, []):
            seen[text].append(job)
    return [f"{', '.join(jobs)}: {text}" for text, jobs in seen.items()]


from rota.cli.sim import sim_app  # noqa: E402 (after app and fail, which it uses)

app.add_typer(sim_app, name="sim")

from rota.cli import admin, jobs, lifecycle  # noqa: E402 (they register onto app)

jobs.register(app)
lifecycle.register(app)
admin.register(app)

from rota.cli import up  # noqa: E402 (registers onto app)

up.register(app)

from rota.cli import people  # noqa: E402 (registers onto app)

people.register(app)

from rota.cli import datasets, serving  # noqa: E402 (register onto app)

serving.register(app)
datasets.register(app)

from rota.cli import interact  # noqa: E402 (registers onto app)

interact.register(app)
