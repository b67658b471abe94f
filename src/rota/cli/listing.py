"""The scientist's commands that look at jobs: ``ps``, ``show``, ``logs`` and ``cancel``.

``rota ps`` folds an array's tasks into one line (``fold_arrays``). Its columns are data
(``COLUMNS``, from ``rota.cli.jobrows``): a name, how to read it from a job, and a drop rank
(``rota.cli.tables``: on a narrow terminal the highest rank goes first, and no word is ever
split). ``-o wide`` adds the queue, user, priority, CPU, memory and reason; ``-o id,state,...``
picks columns by name, as ``kubectl -o custom-columns`` or ``squeue --format`` do; ``-o json``
is ``--json``. ``--limit N`` lists the newest N jobs (1,000 by default) and a note on stderr
says when more exist, naming the ``--after ID`` that lists the next ones (``rota.cli.jobrows``). A
table is drawn from brief views (``GET /v1/jobs?view=brief``, the values its columns read),
JSON from full views. ``--watch`` redraws the list in place every ``--interval`` seconds until
Ctrl-C on a terminal; piped, it prints the table once and then a line per change of a job's
state instead of the table again (``watch_lines``: time, job, old -> new state; JSON lines
alone with ``--json``).

``rota ps`` without ``--watch``, ``rota logs`` and ``rota show`` usually run through
``rota.cli.fast`` instead, which must say and do the same: change both together (``rota show``'s
lines are ``rota.cli.showrows``', which both print).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer

from rota.cli import jobrows, remote
from rota.cli.jobrows import ACTIVE, empty_line
from rota.cli.remote import EXIT_BAD_INPUT, EXIT_FAILED, die, print_json, talking
from rota.cli.tables import Column, console, fit

COLUMNS = jobrows.COLUMNS  # name -> (header, wrap, drop rank)


def chosen_columns(output: str | None) -> tuple[str, ...] | None:
    """``-o``: the columns to show, or None for JSON."""
    try:
        return jobrows.chosen_columns(output)
    except jobrows.BadColumns as exc:
        die(str(exc), EXIT_BAD_INPUT)


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
    limit: int = typer.Option(jobrows.LIMIT, "--limit", min=1, metavar="N",
                              help="At most N jobs, the newest; a note on stderr says when "
                                   "more exist."),
    after: Optional[str] = typer.Option(None, "--after", metavar="ID",
                                        help="Only jobs older than job ID: the next page, as "
                                             "the note names it."),
    watch: bool = typer.Option(False, "--watch", "-w", help="Redraw every --interval seconds "
                               "until Ctrl-C; piped, print a line per change of a job's state."),
    interval: float = typer.Option(2.0, "--interval", min=0.1, metavar="SECONDS",
                                   help="Seconds between two lists with --watch."),
    as_json: bool = typer.Option(False, "--json", help="Print the jobs as JSON."),
) -> None:
    """List jobs, newest first: active ones, or all with -A."""
    names = None if as_json else chosen_columns(output)
    states = jobrows.states_of(state, all_)
    if after is not None:
        remote.job_id(after)
    asked = {"projects": project, "states": states, "queue": queue, "user": user,
             "limit": limit, "after": after}
    empty = empty_line(all_ or bool(state))
    with talking() as client:
        if watch:
            _watch(client, asked, names, interval, empty)
            return
        if names is None:
            jobs, more = client.jobs_page(**asked)
            print_json(jobs)
            shown = len(jobs)
        else:
            columns, rows, more = client.briefs(**asked, values=jobrows.values_for(names))
            console().print(brief_table(names, columns, rows) if rows else empty)
            shown = len(rows)
    if more is not None:
        sys.stdout.flush()
        print(jobrows.more_line(shown, more), file=sys.stderr)


def brief_table(names: tuple[str, ...], columns: list[str], rows: list[list],
                width: int | None = None):
    """The table of jobs' brief views (``GET /v1/jobs?view=brief``), as ``rota.cli.fast``
    draws it."""
    cells = jobrows.cells(names, columns, rows, time.time())
    return fit([Column(*COLUMNS[n]) for n in names], [list(r) for r in zip(*cells)], width)


def _watch(client, asked: dict[str, Any], names: tuple[str, ...] | None, interval: float,
           empty: str) -> None:
    """``--watch``: on a terminal the table (or JSON) redrawn in place every ``interval``;
    piped, the table once and then a line per change of a job's state (``watch_lines``), or
    with ``--json`` JSON lines alone, the first ones each job's state."""
    import json

    def render():
        if names is None:
            return json.dumps(client.jobs_page(**asked)[0], indent=2, sort_keys=True)
        columns, rows, _ = client.briefs(**asked, values=jobrows.values_for(names))
        return brief_table(names, columns, rows) if rows else empty

    try:
        if sys.stdout.isatty():
            from rich.live import Live
            with Live(render(), console=console(), auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(render(), refresh=True)
        seen: dict[str, str] | None = None
        while True:
            columns, rows, _ = client.briefs(**asked, values=["id", "state"])
            at = {c: k for k, c in enumerate(columns)}
            now = {r[at["id"]]: r[at["state"]] for r in rows}
            if seen is None and names is not None:  # the table once, then its changes
                console().print(render())
                seen = now
            for line in watch_lines(seen, now, time.time(), lambda j: _final(client, j),
                                    as_json=names is None):
                print(line)
            sys.stdout.flush()
            seen = now
            time.sleep(interval)
    except KeyboardInterrupt:
        return


def _final(client, job_id: str) -> str:
    """The state of a job no longer listed (it finished, or left the filter)."""
    try:
        return client.job(job_id)["state"]
    except Exception:  # deleted, or no longer visible: say it is gone
        return "gone"


def watch_lines(before: dict[str, str] | None, now: dict[str, str], t: float,
                final: Callable[[str], str], as_json: bool = False) -> list[str]:
    """The lines ``rota ps --watch`` prints when piped, for the jobs listed ``before`` and
    ``now`` (id -> state) at time ``t``: first every job with its state, then one line per
    change, ``TIME ID OLD -> NEW`` (a job no longer listed with the state it ended in, as
    ``final`` reads it; a new one from ``new``); with ``as_json`` each a JSON object (``time``,
    ``job``, ``from``, ``to``)."""
    import json
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
    changes: list[tuple[str, str | None, str]] = []
    if before is None:
        changes = [(j, None, s) for j, s in sorted(now.items(), key=_id_order)]
    else:
        for j in sorted(set(before) | set(now), key=_id_order):
            old, new = before.get(j, "new"), now.get(j)
            if new is None:
                new = final(j)
            if old != new:
                changes.append((j, old, new))
    if as_json:
        return [json.dumps({"time": t, "job": j, "from": old, "to": new})
                for j, old, new in changes]
    return [f"{when} {j} {new}" if old is None else f"{when} {j} {old} -> {new}"
            for j, old, new in changes]


def _id_order(item: Any) -> tuple[int, str]:
    job = item[0] if isinstance(item, tuple) else item
    return (int(job), job) if job.isdigit() else (0, job)


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
    attempt: Optional[int] = typer.Option(None, "--attempt", min=0, metavar="N",
                                          help="An earlier attempt's logs (rota show numbers "
                                               "the attempts)."),
    all_replicas: bool = typer.Option(False, "--all-replicas", help="Every replica's, each "
                                      "line labelled with its rank (as srun --label)."),
) -> None:
    """Print a job's output and errors (its stdout here on stdout, its stderr on stderr)."""
    from rota.cli.logs import STREAMS, ended_line, follow as follow_logs, outcome, show_now
    remote.job_id(job)
    if stdout_only and stderr_only:
        die("--stdout, --stderr: give one of them, or neither for both", EXIT_BAD_INPUT)
    if follow and attempt is not None:
        die("--follow, --attempt: an earlier attempt has ended; its logs are printed whole",
            EXIT_BAD_INPUT)
    if all_replicas and replica:
        die("--replica, --all-replicas: give one of them", EXIT_BAD_INPUT)
    streams = ("stdout",) if stdout_only else ("stderr",) if stderr_only else STREAMS
    with talking() as client:
        ranks = tuple(range(client.job(job)["replicas"])) if all_replicas else None
        if not follow:
            show_now(client, job, replica, streams, tail, ranks,
                     **({} if attempt is None else {"attempt": attempt}))
            return
        try:
            follow_logs(client, job, replica, streams, tail, ranks)
        except KeyboardInterrupt:
            return
        final = client.job(job)
    if final["state"] != "succeeded":
        print(ended_line(final), file=sys.stderr)
    raise typer.Exit(outcome(final))


def cancel(jobs: Optional[List[str]] = typer.Argument(
               None, metavar="[ID|ARRAY[TASKS]]...", autocompletion=complete_job_ids,
               help="Jobs to cancel: an ID (an array's cancels all its tasks, as scancel "
                    "does), or an array's tasks as rota ps prints them: 88[3-9]."),
           user: Optional[str] = typer.Option(None, "--user", "-u", help="Only this user's "
                                              "jobs."),
           state: Optional[List[str]] = typer.Option(None, "--state", help="Only jobs in this "
                                                     "state (repeat, or comma-separate)."),
           name: Optional[str] = typer.Option(None, "--name", help="Only jobs of this name."),
           queue: Optional[str] = typer.Option(None, "--queue", help="Only this queue's jobs."),
           filename: Optional[Path] = typer.Option(
               None, "--filename", "-f", metavar="FILE", help="The jobs this job file makes "
               "(its name, and its project and queue where it names them), as kubectl delete "
               "-f."),
           force: bool = typer.Option(False, "--force", help=(
               "Operators: end the jobs as cancelled now, freeing their GPUs, without waiting "
               "for their backend to say they stopped (for a job it can no longer be asked "
               "about); one best-effort stop follows."))) -> None:
    """Cancel jobs: a pending one at once, a running one after its grace period. With
    --user, --state, --name or --queue: only the jobs named that match, or without IDs every
    unfinished job you may see that matches (as scancel)."""
    from rota.cli.selection import Filters, Mistake, choose, parse
    try:
        wanted = parse(jobs or ())
    except Mistake as exc:
        die(str(exc), EXIT_BAD_INPUT)
    project = None
    if filename is not None:
        name, project, queue = _named_by(filename, name, queue)
    filters = Filters(user, tuple(jobrows.states_of(state, False) if state else ()), name, queue,
                      project)
    if wanted.empty and not filters.any:
        die("name the jobs to cancel: IDs (88), an array's tasks (88[3-9]), a job file (-f), "
            "or a filter (--user, --state, --name, --queue)", EXIT_BAD_INPUT)
    with talking() as client:
        canceller = _Canceller(client, force)
        if wanted.tasks or filters.any:
            listed = client.jobs(states=list(filters.states or jobrows.ACTIVE), queue=queue,
                                 user=user, limit=10**9)
            chosen, missing = choose(listed, wanted, filters)
            for job in chosen:
                canceller.cancel(job)
            for what in missing:
                if what.isdigit() and not filters.any:
                    canceller.cancel(what)  # not unfinished: the server says what it is
                else:
                    canceller.fail(what, "no unfinished job you may see matches it"
                                   + (" and the filters" if filters.any else ""))
        else:
            for job in wanted.ids:
                canceller.cancel_array(job)
        canceller.summary()
    if canceller.failed:
        raise typer.Exit(EXIT_FAILED)


def _named_by(path: Path, name: Optional[str], queue: Optional[str]) -> tuple[str, str | None,
                                                                            str | None]:
    """The name, project and queue of the jobs a job file makes (``-f``); the file's name must
    agree with ``--name`` and its queue with ``--queue`` where both are given."""
    from rota.core import InvalidSpec
    from rota.spec import read_mapping
    try:
        data = read_mapping(path, "name, entrypoint, resources, ...")
    except InvalidSpec as exc:
        die(f"-f: {path}: {exc}", EXIT_BAD_INPUT)
    if data.get("kind") == "service" or "service" in data:
        die(f"-f: {path} is a service file: rota services delete NAME stops a service",
            EXIT_BAD_INPUT)
    named = data.get("name")
    if not isinstance(named, str) or not named:
        die(f"-f: {path} names no job (name:): cancel its jobs by ID, rota ps lists them",
            EXIT_BAD_INPUT)
    for option, given, theirs in (("--name", name, named), ("--queue", queue, data.get("queue"))):
        if given is not None and theirs is not None and given != theirs:
            die(f"{option}: {given!r} is not the file's {theirs!r}; give one of them",
                EXIT_BAD_INPUT)
    return named, data.get("project"), queue or data.get("queue")


class _Canceller:
    """Cancels one job at a time and says what became of each: a line per job, or, past
    ``SAY_EACH`` jobs, counts."""

    SAY_EACH = 10

    def __init__(self, client, force: bool) -> None:
        self.client, self.force = client, force
        self.done: list[str] = []
        self.requested: list[tuple[str, str]] = []
        self.asked: set[str] = set()  # every job cancelled or asked to stop, once each
        self.failed = False

    def cancel(self, job: str) -> dict[str, Any] | None:
        from rota.client import ApiError
        if job in self.asked:
            return None
        try:
            rec = self.client.cancel(job, force=self.force)
        except ApiError as exc:
            self.fail(job, exc.message)
            return None
        self._count(rec)
        return rec

    def cancel_array(self, job: str) -> None:
        """``job``, and where it is an array's ID every unfinished task of it: the error of
        the job itself (cancelled already, ...) is said only if no task was left to cancel."""
        from rota.cli.selection import oldest_first
        from rota.client import ApiError
        try:
            rec = self.client.cancel(job, force=self.force)
        except ApiError as exc:
            rec, error = None, exc.message
        else:
            error = None
            self._count(rec)
        view = rec if rec is not None else self._job(job)
        if view is not None and view.get("array_id") == view["id"]:
            tasks = [j["id"] for j in self.client.jobs(states=list(ACTIVE), limit=10**9)
                     if j.get("array_id") == view["id"] and j["id"] != view["id"]]
            for task in oldest_first(tasks):
                self.cancel(task)
            if tasks:
                return
        if error is not None:
            self.fail(job, error)

    def _job(self, job: str) -> dict[str, Any] | None:
        from rota.client import ApiError
        try:
            return self.client.job(job)
        except ApiError:
            return None

    def _count(self, rec: dict[str, Any]) -> None:
        self.asked.add(rec["id"])
        if rec["state"] == "cancelled":
            self.done.append(rec["id"])
        else:
            self.requested.append((rec["id"], rec["state"]))

    def fail(self, what: str, why: str) -> None:
        print(f"error: job {what}: {why}", file=sys.stderr)
        self.failed = True

    def summary(self) -> None:
        if len(self.done) + len(self.requested) <= self.SAY_EACH:
            for job in self.done:
                print(f"Cancelled job {job}.")
            for job, state in self.requested:
                print(f"Cancel requested for job {job} ({state}): it gets its grace period to "
                      f"stop. rota show {job} shows when it has.")
            return
        if self.done:
            print(f"Cancelled {len(self.done)} jobs.")
        if self.requested:
            print(f"Cancel requested for {len(self.requested)} jobs that hold resources: each "
                  "gets its grace period to stop. rota ps shows them until they have.")


def register(app: typer.Typer) -> None:
    app.command("ps")(ps)
    app.command("show")(show)
    app.command("logs")(logs)
    app.command("cancel")(cancel)
    app.command("delete", help="The same as rota cancel (as kubectl delete).")(cancel)
