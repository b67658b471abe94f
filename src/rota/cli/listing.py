"""The scientist's commands that look at jobs: ``ps``, ``show``, ``logs`` and ``cancel``.

``rota ps`` folds an array's tasks into one line (``fold_arrays``). Its columns are data (``COLUMNS``): a name, how to read it from a job, and a drop rank
(``rota.cli.tables``: on a narrow terminal the highest rank goes first, and no word is ever
split). ``-o wide`` adds the queue, user, priority, CPU, memory and reason; ``-o id,state,...``
picks columns by name, as ``kubectl -o custom-columns`` or ``squeue --format`` do; ``-o json``
is ``--json``. ``--watch`` prints the list again every ``--interval`` seconds until Ctrl-C:
redrawn in place on a terminal, printed again when it changed otherwise.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import typer

from rota.cli import remote
from rota.cli.remote import EXIT_BAD_INPUT, EXIT_FAILED, age, die, gpus, placement, print_json
from rota.cli.remote import talking
from rota.cli.tables import Column, console, fit
from rota.cli.units import amount
from rota.core.jobwords import reason_column

ACTIVE = ("pending", "scheduled", "running", "preempting")


@dataclass(frozen=True, slots=True)
class Field:
    column: Column
    value: Callable[[dict[str, Any]], str]


COLUMNS: dict[str, Field] = {
    "id": Field(Column("ID"), lambda j: j["id"]),
    "name": Field(Column("NAME", drop=1), lambda j: j["name"] or "-"),
    "project": Field(Column("PROJECT", drop=4), lambda j: j["project"]),
    "queue": Field(Column("QUEUE", drop=6), lambda j: j["queue"]),
    "user": Field(Column("USER", drop=7), lambda j: j["user"]),
    "state": Field(Column("STATE"), lambda j: j["state"]),
    "priority": Field(Column("PRIORITY", drop=9, justify="right"), lambda j: str(j["priority"])),
    "gpus": Field(Column("GPUS", drop=3), gpus),
    "cpu": Field(Column("CPU", drop=8, justify="right"),
                 lambda j: f"{j['request']['cpu_milli'] / 1000:g}"),
    "memory": Field(Column("MEMORY", drop=8), lambda j: amount("memory",
                                                                j["request"]["memory_mib"])),
    "where": Field(Column("WHERE", wrap=True, drop=2), placement),
    "age": Field(Column("AGE", drop=5), lambda j: age(j["submit_time"])),
    "exit": Field(Column("EXIT", drop=9), lambda j: "-" if j.get("exit_code") is None
                  else str(j["exit_code"])),
    "reason": Field(Column("REASON", wrap=True, drop=10), reason_column),
}
DEFAULT = ("id", "name", "project", "state", "gpus", "where", "age")
WIDE = ("id", "name", "project", "queue", "user", "state", "priority", "gpus", "cpu",
        "memory", "where", "age", "exit", "reason")


def chosen_columns(output: str | None) -> tuple[str, ...] | None:
    """``-o``: the columns to show, or None for JSON."""
    if output in (None, ""):
        return DEFAULT
    if output == "json":
        return None
    if output == "wide":
        return WIDE
    names = tuple(n.strip().lower() for n in output.split(",") if n.strip())
    unknown = [n for n in names if n not in COLUMNS]
    if unknown or not names:
        die(f"-o: unknown column {unknown[0] if unknown else output!r}; give wide, json or "
            f"columns separated by commas: {', '.join(COLUMNS)}", EXIT_BAD_INPUT)
    return names


def jobs_table(jobs: list[dict[str, Any]], names: tuple[str, ...], width: int | None = None):
    fields = [COLUMNS[n] for n in names]
    return fit([f.column for f in fields], [[f.value(j) for f in fields]
                                            for j in fold_arrays(jobs)], width)


def fold_arrays(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The jobs, each array's tasks folded into one line (``12[0-9]``, state ``3 running, 7
    pending``) where its first task would be."""
    from collections import Counter
    tasks: dict[str, list[dict[str, Any]]] = {}
    for j in jobs:
        if j.get("array_id") is not None:
            tasks.setdefault(j["array_id"], []).append(j)
    out, done = [], set()
    for j in jobs:
        array = j.get("array_id")
        if array is None:
            out.append(j)
        elif array not in done:
            done.add(array)
            mine = tasks[array]
            indices = sorted(t["array_index"] for t in mine)
            counts = Counter(t["state"] for t in mine)
            limit = f"%{j['array_limit']}" if j.get("array_limit") else ""
            out.append({**j, "id": f"{array}[{indices[0]}-{indices[-1]}{limit}]",
                        "state": ", ".join(f"{n} {s}" for s, n in counts.most_common()),
                        "placement": None})
    return out


def complete_job_ids(incomplete: str) -> list[str]:
    """Shell completion of a job id: the active jobs you can see (nothing if no server)."""
    try:
        from rota.client import Client
        with Client(timeout_s=2.0) as client:
            found = client.jobs(states=list(ACTIVE), limit=200)
    except Exception:  # completion must never print an error into the shell
        return []
    return [j["id"] for j in found if j["id"].startswith(incomplete)]


def job_argument() -> Any:
    return typer.Argument(..., metavar="ID", autocompletion=complete_job_ids)


def ps(
    all_: bool = typer.Option(False, "--all", "-A", help="Also finished jobs."),
    state: Optional[List[str]] = typer.Option(None, "--state", help="Only jobs in this state "
                                              "(repeat, or comma-separate)."),
    project: Optional[List[str]] = typer.Option(None, "--project", help="Only this project."),
    queue: Optional[str] = typer.Option(None, "--queue", help="Only this queue."),
    user: Optional[str] = typer.Option(None, "--user", "-u", help="Only this user's jobs."),
    output: Optional[str] = typer.Option(None, "--output", "-o", metavar="wide|json|COLS",
                                         help="wide (more columns), json, or columns by name: "
                                              + ",".join(COLUMNS) + "."),
    watch: bool = typer.Option(False, "--watch", "-w", help="Print again every --interval "
                               "seconds until Ctrl-C."),
    interval: float = typer.Option(2.0, "--interval", min=0.1, metavar="SECONDS",
                                   help="Seconds between two lists with --watch."),
    as_json: bool = typer.Option(False, "--json", help="Print the jobs as JSON."),
) -> None:
    """List jobs, newest first: active ones, or all with -A."""
    names = None if as_json else chosen_columns(output)
    states = [s for v in state or [] for s in v.split(",") if s] or (None if all_ else list(ACTIVE))

    def fetch(client) -> list[dict[str, Any]]:
        return client.jobs(projects=project, states=states, queue=queue, user=user)

    with talking() as client:
        if watch:
            _watch(lambda: fetch(client), names, interval, empty=_empty(all_ or bool(state)))
            return
        jobs = fetch(client)
    if names is None:
        print_json(jobs)
    elif not jobs:
        print(_empty(all_ or bool(state)))
    else:
        console().print(jobs_table(jobs, names))


def _empty(everything: bool) -> str:
    return ("No jobs" + ("" if everything else " active (rota ps -A shows finished ones)")
            + ". Submit one with rota submit JOB.yaml or rota run -- CMD.")


def _watch(fetch: Callable[[], list[dict[str, Any]]], names: tuple[str, ...] | None,
           interval: float, empty: str) -> None:
    import json

    def render(jobs):
        if names is None:
            return json.dumps(jobs, indent=2, sort_keys=True)
        return jobs_table(jobs, names) if jobs else empty

    out = console()
    try:
        if sys.stdout.isatty():
            from rich.live import Live
            with Live(render(fetch()), console=out, auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(render(fetch()), refresh=True)
        last = None
        while True:
            jobs = fetch()
            seen = [(j["id"], j["state"], j.get("placement")) for j in jobs]
            if seen != last:
                out.print(render(jobs))
                out.print()
                sys.stdout.flush()
                last = seen
            time.sleep(interval)
    except KeyboardInterrupt:
        return


def show(
    job: str = job_argument(),
    as_json: bool = typer.Option(False, "--json", help="The job and its events as JSON."),
) -> None:
    """A job's state, placement, why it waits, estimated start, and history."""
    from rota.cli.detail import render_job
    from rota.cli.logs import current
    remote.job_id(job)
    with talking() as client:
        record, events = client.job(job), client.events(job)
        if as_json:
            print_json({**record, "events": events})
            return
        nodes = client.nodes() if record["state"] == "pending" else []
        errors = current(client, job, 0, "stderr") if record["state"] == "failed" else b""
    render_job(record, events, console(), nodes=nodes, stderr=errors)


def logs(
    job: str = job_argument(),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the job "
                                "ends, then exit with its exit status."),
    replica: int = typer.Option(0, "--replica", help="Which replica of a gang (0 is the first)."),
    tail: Optional[int] = typer.Option(None, "--tail", min=0, metavar="N",
                                       help="Only the last N lines of each stream."),
    stdout_only: bool = typer.Option(False, "--stdout", help="Only standard output."),
    stderr_only: bool = typer.Option(False, "--stderr", help="Only standard error."),
) -> None:
    """Print a job's output and errors (its stdout here on stdout, its stderr on stderr)."""
    from rota.cli.logs import STREAMS, ended_line, follow as follow_logs, outcome, show_now
    remote.job_id(job)
    if stdout_only and stderr_only:
        die("--stdout, --stderr: give one of them, or neither for both", EXIT_BAD_INPUT)
    streams = ("stdout",) if stdout_only else ("stderr",) if stderr_only else STREAMS
    with talking() as client:
        if not follow:
            show_now(client, job, replica, streams, tail)
            return
        try:
            follow_logs(client, job, replica, streams, tail)
        except KeyboardInterrupt:
            return
        final = client.job(job)
    if final["state"] != "succeeded":
        print(ended_line(final), file=sys.stderr)
    raise typer.Exit(outcome(final))


def cancel(jobs: List[str] = job_argument()) -> None:
    """Cancel jobs: a pending one at once, a running one after its grace period."""
    from rota.client import ApiError
    for job in jobs:
        remote.job_id(job)
    failed = False
    with talking() as client:
        for job in jobs:
            try:
                rec = client.cancel(job)
            except ApiError as exc:
                print(f"error: job {job}: {exc.message}", file=sys.stderr)
                failed = True
                continue
            if rec["state"] == "cancelled":
                print(f"Cancelled job {rec['id']}.")
            else:
                print(f"Cancel requested for job {rec['id']} ({rec['state']}): it gets its "
                      f"grace period to stop. rota show {rec['id']} shows when it has.")
    if failed:
        raise typer.Exit(EXIT_FAILED)


def register(app: typer.Typer) -> None:
    app.command("ps")(ps)
    app.command("show")(show)
    app.command("logs")(logs)
    app.command("cancel")(cancel)
