"""``rota ps``, ``rota logs``, ``rota run``, ``rota submit``, ``rota queues``, ``rota nodes`` and
``rota show`` started in a few milliseconds:
a small parser for their options, the standard library's socket (``rota.client.bare``) and
plain tables (``rota.cli.plain``), and none of typer, rich, pydantic or rota's domain model.
``rota run`` and ``rota submit`` are in ``rota.cli.fastjobs``, which says what they leave to
the Typer commands.

``run(argv)`` does the command and exits, or returns (having changed nothing, and printed
nothing) when it does not know every word of the command line: ``--help``, ``rota ps
--watch``, an option it does not know, a value it does not read as the Typer command would (a
number that is not plain digits, a value that starts with ``-``), a stray argument; and for
``rota run`` and ``rota submit``, whatever ``rota.cli.fastjobs`` leaves to the Typer command (a
job the server refused, an upload, ...). The Typer command (``rota.cli.listing``,
``rota.cli.jobs``) then runs it, with its help and its error lines. What the fast command
prints, its error lines and exit statuses are the Typer command's:
``tests/cli/test_cli_fast.py``, ``test_cli_fast_jobs.py`` and ``test_cli_fast_show.py`` run
the two on the same server and compare them, and ``test_cli_fast_options.py`` checks the
option tables here (``PS``, ``LOGS``, ``QUEUES``, ``NODES``, ``SHOW``; ``RUN``, ``SUBMIT`` in
``fastjobs``) against the Typer commands' definitions: the same spellings, each read the same
way. ``rota queues`` and ``rota nodes`` build their rows with the Typer commands' own code
(``rota.cli.clusterrows``), ``rota show`` its lines (``rota.cli.showrows``); ``rota show``
loads the part of rota's domain model that words a job's reasons (``rota.core.jobwords``).

Options are read as click reads them: ``--opt VALUE``, ``--opt=VALUE``, ``-o VALUE``,
``-oVALUE``, short flags together (``-Af``), the last of a repeated single option wins,
arguments and options in any order, ``--`` ends the options.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping

from rota.cli.failures import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, failure
from rota.cli.failures import not_a_job_id

FLAG, VALUE, MANY, COUNT = "flag", "value", "many", "count"  # COUNT: a whole number >= 0


class Usage(Exception):
    """The command line is not one this module reads; the Typer command gets it."""


def parse(argv: list[str], options: Mapping[str, tuple[str, str]], arguments: int,
          rest: bool = False) -> dict[str, object]:
    """``options``: each spelling (``--all``, ``-A``) to (name, kind); ``arguments``: how many
    positional arguments there must be. ``rest``: the first positional argument ends the
    options, and it and every word after it are the arguments, ``arguments`` of them at least
    (``rota run CMD ARGS``, as click reads a command without interspersed arguments). Raises
    ``Usage`` for anything else."""
    given: dict[str, object] = {}
    positional: list[str] = []
    words = list(argv)
    while words:
        word = words.pop(0)
        if word == "--":
            positional += words
            break
        if not word.startswith("-") or word == "-":
            positional.append(word)
            if rest:
                positional += words
                break
        elif word.startswith("--"):
            spelling, eq, value = word.partition("=")
            name, kind = _known(options, spelling)
            if kind == FLAG:
                if eq:
                    raise Usage(word)
                given[name] = True
            else:
                _take(given, name, kind, value if eq else _next(words))
        else:
            for k in range(1, len(word)):
                name, kind = _known(options, "-" + word[k])
                if kind == FLAG:
                    given[name] = True
                    continue
                rest = word[k + 1:]
                _take(given, name, kind, rest if rest else _next(words))
                break
    if len(positional) < arguments or (len(positional) > arguments and not rest):
        raise Usage(" ".join(positional))
    given["arguments"] = positional
    return given


def _known(options: Mapping[str, tuple[str, str]], spelling: str) -> tuple[str, str]:
    if spelling not in options:
        raise Usage(spelling)
    return options[spelling]


def _next(words: list[str]) -> str:
    if not words or words[0].startswith("-"):
        raise Usage("a value")
    return words.pop(0)


def _take(given: dict[str, object], name: str, kind: str, value: str) -> None:
    if value.startswith("-"):
        raise Usage(value)
    if kind == COUNT:
        if not (value.isascii() and value.isdigit()):
            raise Usage(value)
        given[name] = int(value)
    elif kind == MANY:
        given.setdefault(name, []).append(value)
    else:
        given[name] = value


def fail(message: str, status: int) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(status)


def talking(work: Callable[[object], object]) -> object:
    """``work(client)`` with a client of the configured server; a failed request becomes one
    line and an exit status, as ``rota.cli.remote.talking`` says it."""
    from rota.client.bare import BareClient
    try:
        with BareClient(on_retry=lambda message: print(f"note: {message}", file=sys.stderr)) \
                as client:
            return work(client)
    except Usage:
        raise
    except Exception as exc:  # noqa: BLE001 - sorted by failure(); the rest is re-raised
        known = failure(exc)
        if known is None:
            raise
        fail(*known)


# -- rota ps --------------------------------------------------------------------------------------

PS = {"--all": ("all", FLAG), "-A": ("all", FLAG), "--json": ("json", FLAG),
      "--state": ("state", MANY), "--project": ("project", MANY), "--queue": ("queue", VALUE),
      "--user": ("user", VALUE), "-u": ("user", VALUE), "--output": ("output", VALUE),
      "-o": ("output", VALUE), "--limit": ("limit", COUNT), "--after": ("after", VALUE)}


def ps(argv: list[str]) -> None:
    import gc
    from rota.cli import jobrows
    # a short command that reads up to 10,000s of jobs' values: the collector, run again and
    # again as they pile up, would take longer than it frees
    gc.disable()
    given = parse(argv, PS, 0)
    limit = given.get("limit", jobrows.LIMIT)
    if limit < 1:
        raise Usage("--limit")  # the Typer command says what the range is
    everything = bool(given.get("all"))
    try:
        names = None if given.get("json") else jobrows.chosen_columns(given.get("output"))
    except jobrows.BadColumns as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    states = jobrows.states_of(given.get("state"), everything)
    after = given.get("after")
    if after is not None and (problem := not_a_job_id(after)) is not None:
        fail(problem, EXIT_BAD_INPUT)
    asked = {"projects": given.get("project"), "states": states, "queue": given.get("queue"),
             "user": given.get("user"), "limit": limit, "after": after}
    if names is None:
        jobs, more = talking(lambda client: client.jobs_page(**asked))
        import json
        print(json.dumps(jobs, indent=2, sort_keys=True))
    else:  # a table needs only what it shows: brief views
        columns, rows, more = talking(lambda client: client.briefs(
            **asked, values=jobrows.values_for(names)))
        if rows:
            _table(jobrows, names, columns, rows)
        else:
            print(jobrows.empty_line(everything or bool(given.get("state"))))
    if more is not None:
        sys.stdout.flush()
        print(jobrows.more_line(len(jobs if names is None else rows), more), file=sys.stderr)


def _table(jobrows, names: tuple[str, ...], columns: list[str], rows: list[list]) -> None:
    _print_table([jobrows.COLUMNS[n] for n in names],
                 jobrows.cells(names, columns, rows, time.time()))


def _print_table(specs, cells: list[list[str]]) -> None:
    """The columns ``specs`` (``rota.cli.jobrows.Spec``) of ``cells`` (each the cells of one
    column, top to bottom), as ``rota.cli.tables.fit`` lays them out: plainly where they fit
    at full width, else by rich."""
    from rota.cli import plain
    limit = plain.width()
    text = plain.table([s.header for s in specs], [s.justify for s in specs], cells, limit)
    if text is not None:
        sys.stdout.write(text)
        return
    from rota.cli.tables import Column, console, fit  # rich lays out what plain cannot
    console().print(fit([Column(*s) for s in specs], [list(r) for r in zip(*cells)], limit))


# -- rota logs ------------------------------------------------------------------------------------

LOGS = {"--follow": ("follow", FLAG), "-f": ("follow", FLAG), "--stdout": ("stdout", FLAG),
        "--stderr": ("stderr", FLAG), "--replica": ("replica", COUNT), "--tail": ("tail", COUNT)}


def logs(argv: list[str]) -> None:
    from rota.cli.logs import STREAMS, ended_line, follow, outcome, show_now
    given = parse(argv, LOGS, 1)
    job = given["arguments"][0]
    if (problem := not_a_job_id(job)) is not None:
        fail(problem, EXIT_BAD_INPUT)
    if given.get("stdout") and given.get("stderr"):
        fail("--stdout, --stderr: give one of them, or neither for both", EXIT_BAD_INPUT)
    streams = ("stdout",) if given.get("stdout") else ("stderr",) if given.get("stderr") \
        else STREAMS
    replica, tail = given.get("replica", 0), given.get("tail")

    def work(client):
        if not given.get("follow"):
            show_now(client, job, replica, streams, tail)
            return None
        try:
            follow(client, job, replica, streams, tail)
        except KeyboardInterrupt:
            return None
        return client.job(job)

    final = talking(work)
    if final is None:
        return
    if final["state"] != "succeeded":
        print(ended_line(final), file=sys.stderr)
    raise SystemExit(outcome(final))


# -- rota run, rota submit (rota.cli.fastjobs) ------------------------------------------------

def run_job(argv: list[str]) -> None:
    from rota.cli.fastjobs import run
    run(argv)


def submit(argv: list[str]) -> None:
    from rota.cli.fastjobs import submit
    submit(argv)


# -- rota queues, rota nodes -------------------------------------------------------------------

QUEUES = {"--json": ("json", FLAG), "--output": ("output", VALUE), "-o": ("output", VALUE)}
NODES = QUEUES


def queues(argv: list[str]) -> None:
    from rota.cli import clusterrows
    given = parse(argv, QUEUES, 0)
    output = given.get("output")
    if output not in (None, "wide"):
        raise Usage("--output")  # the Typer command says what it expects
    data = talking(lambda client: client.queues())
    if given.get("json"):
        _json(data)
    elif not data:
        print(clusterrows.NO_QUEUES)
    else:
        _specs_table(*clusterrows.queue_table(data, output == "wide"))


def nodes(argv: list[str]) -> None:
    from rota.cli import clusterrows
    given = parse(argv, NODES, 0)
    output = given.get("output")
    if output not in (None, "wide", "json"):
        raise Usage("--output")
    data = talking(lambda client: client.nodes())
    if given.get("json") or output == "json":
        _json(data)
        return
    if not data:
        print(clusterrows.NO_NODES)
        return
    _specs_table(*clusterrows.node_table(data, output == "wide"))
    from rota.cli.plain import wrapped
    for note, rest in clusterrows.node_notes(data):
        print(wrapped(note, rest=rest))


def _json(value: object) -> None:
    import json
    print(json.dumps(value, indent=2, sort_keys=True))  # as rota.cli.remote.print_json


def _specs_table(specs, rows: list[list[str]]) -> None:
    """``rows`` under the columns ``specs``, as ``_print_table`` prints them."""
    _print_table(specs, [list(c) for c in zip(*rows)])


# -- rota show ------------------------------------------------------------------------------------

SHOW = {"--json": ("json", FLAG)}


def show(argv: list[str]) -> None:
    """``rota show ID``: the requests and the parts of ``rota.cli.showrows`` that
    ``rota.cli.listing.show`` makes, each printed plainly where rich would print the same
    characters, else by rich (``rota.cli.detail.print_part``)."""
    from rota.cli.logs import current
    given = parse(argv, SHOW, 1)
    job = given["arguments"][0]
    if (problem := not_a_job_id(job)) is not None:
        fail(problem, EXIT_BAD_INPUT)
    as_json = bool(given.get("json"))

    def work(client):
        from urllib.parse import quote
        record = client.job(job)
        events = client.get(f"/v1/jobs/{quote(job, safe='')}/events")
        if as_json:
            return record, events, [], b""
        nodes = client.nodes() if record["state"] == "pending" else []
        errors = current(client, job, 0, "stderr") if record["state"] == "failed" else b""
        return record, events, nodes, errors

    record, events, nodes, errors = talking(work)
    if as_json:
        _json({**record, "events": events})
        return
    from rota.cli import plain, showrows
    limit = plain.width()
    for part in showrows.parts(record, events, limit, time.time(), nodes, errors):
        text = _plain_part(plain, part, limit)
        if text is None:
            from rota.cli.detail import print_part
            from rota.cli.tables import console
            print_part(console(), part)
        else:
            sys.stdout.write(text)


def _plain_part(plain, part: tuple, limit: int) -> str | None:
    """A part of ``rota show`` as rich prints it (``rota.cli.detail.print_part``), or None
    where only rich can tell (see ``rota.cli.plain``)."""
    from rota.cli.showrows import HEAD, HEADING, SAY, TABLE
    kind, text = part[0], part[1]
    if kind == TABLE:
        return plain.table([s.header for s in text], [s.justify for s in text],
                           [list(c) for c in zip(*part[2])], limit)
    terminal = plain.terminal()
    if terminal is None or not plain.plain_text(text, markup=kind in (SAY, HEADING)):
        return None
    if kind == SAY and len(text) > limit:
        return None  # rich wraps it
    if terminal and kind in (HEAD, HEADING):
        bold = part[2] if kind == HEAD else len(text)
        return f"{plain.BOLD}{text[:bold]}{plain.RESET}{text[bold:]}\n"
    return text + "\n"


COMMANDS: dict[str, Callable[[list[str]], None]] = {"ps": ps, "logs": logs, "run": run_job,
                                                    "submit": submit, "queues": queues,
                                                    "nodes": nodes, "show": show}


def run(argv: list[str]) -> None:
    """Do ``rota ARGV`` and exit, or return when the Typer app must (see the module)."""
    command = COMMANDS.get(argv[0]) if argv else None
    if command is None:
        return
    try:
        command(argv[1:])
        sys.stdout.flush()
    except Usage:
        return
    except KeyboardInterrupt:
        print(file=sys.stderr)  # as click does before it aborts
        raise SystemExit(EXIT_INTERRUPTED) from None
    except BrokenPipeError:  # rota ps | head: as click, exit 1 and say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(EXIT_FAILED) from None
    raise SystemExit(0)
