"""What ``rota show`` prints, as plain values: the parts of one job's page, in order, each
already worded and wrapped to the terminal's width. The Typer command (``rota.cli.detail``,
which prints them with rich) and its fast twin (``rota.cli.fast``, which prints them without
rich wherever rich would print the same characters) both read it, so that both print the same;
it imports neither typer nor rich.

A part is a tuple whose first item says how it is printed:

- ``(HEAD, text, n)``: the title line, its first ``n`` characters bold on a terminal;
- ``(LINE, text)``: lines printed as they are (no markup, no wrapping by rich);
- ``(SAY, text)``: a short sentence rich prints with its markup and wraps at the width (none
  of these has markup; each fits any terminal of 80 columns);
- ``(HEADING, text)``: the bold heading of a table;
- ``(TABLE, specs, rows)``: a table of ``rota.cli.jobrows.Spec`` columns, laid out as
  ``rota.cli.tables.fit`` does.

What is said: state, with the reason of its last move; what it asked for and where it runs;
for a pending job, the latest scheduling cycle's wait reasons as sentences, hints and the
estimated start (a job no cycle has explained yet: how long it has been queued); for a failed
job, its reasons and the last lines of replica 0's standard error; a note when its queue no
longer admits its project or was deleted; who holds it back; its project's budget when past a
limit; its attempts and its events. The words come from ``rota.core.jobwords``, which the web
dashboard's job page shares.
"""

from __future__ import annotations

from typing import Any

from rota.cli.jobrows import Spec
from rota.cli.plain import wrapped
from rota.core.jobwords import (
    age, hints, not_yet_explained, placement, queue_note, request_text, state_text,
    stderr_tail, when, why_lines,
)
from rota.core.wording import duration

HEAD, LINE, SAY, HEADING, TABLE = "head", "line", "say", "heading", "table"
LABEL = 11  # "Requests:  " and the like: continuation lines are indented under the value
ATTEMPT_COLUMNS = (Spec("#"), Spec("STARTED"), Spec("ENDED", drop=2), Spec("WHERE", wrap=True),
                   Spec("END"), Spec("CHECKPOINT", drop=1), Spec("REASON", wrap=True))
EVENT_COLUMNS = (Spec("WHEN"), Spec("KIND"), Spec("MESSAGE", wrap=True))


def parts(job: dict[str, Any], events: list[dict[str, Any]], width: int, now: float,
          nodes: list[dict[str, Any]] = (), stderr: bytes = b"") -> list[tuple]:
    """The parts of ``rota show`` of ``job`` (its view, ``GET /v1/jobs/ID``) with its
    ``events``, at ``width`` columns; ``nodes`` (a pending job's) name the nodes that take no
    new job, ``stderr`` is the end of a failed job's standard error (replica 0)."""
    out = [_head(job, width)]
    out += [(LINE, wrapped(text, width, f"{label:<{LABEL}}", " " * LABEL))
            for label, text in _facts(job, now)]
    if job["state"] == "pending":
        out += _pending(job, list(nodes), width, now)
    elif job["state"] == "failed":
        out += [(LINE, wrapped(text, width, "  - ", "    ")) for text in why_lines(job)]
        out += _stderr_tail(stderr)
    out += _attempts(job.get("history") or [], now)
    if events:
        out += [(HEADING, "Events"), (TABLE, EVENT_COLUMNS, [
            [f"{age(e['time'], now)} ago", e["kind"], e["message"]] for e in events])]
    return out


def _head(job: dict[str, Any], width: int) -> tuple:
    title = f"Job {job['id']}" + (f" {job['name']}" if job["name"] else "")
    return (HEAD, wrapped(f"{title}  project {job['project']}, queue {job['queue']}, user "
                          f"{job['user']}, priority {job['priority']}, {job['kind']}",
                          width, "", "    "), len(title))


def _facts(job: dict[str, Any], now: float) -> list[tuple[str, str]]:
    """(label, sentence) of the lines under the title."""
    facts = [("State:", state_text(job)),
             ("Submitted:", f"{age(job['submit_time'], now)} ago"
                            + (f", attempt #{job['attempts']}" if job["attempts"] else "")),
             ("Requests:", request_text(job) + (f", walltime {duration(job['walltime_s'])}"
                                                if job["walltime_s"] else ""))]
    if job.get("placement"):
        facts.append(("Placement:", placement(job) + (f" (flavour {job['flavor']})"
                                                      if job.get("flavor") else "")))
        if job.get("started_at"):
            facts.append(("Started:", when(job["started_at"], now)))
    note = queue_note(job)
    if note:
        facts.append(("Queue:", note))
    if job.get("held"):
        facts.append(("Held:", f"{job['held']} (rota release {job['id']} lets it go)"))
    budget = budget_line(job["project"], job.get("budget"))
    if budget is not None:
        facts.append(("Budget:", budget))
    return facts


def _pending(job: dict[str, Any], nodes: list[dict[str, Any]], width: int,
             now: float) -> list[tuple]:
    lines = why_lines(job, nodes, now)
    if not lines:
        return [(LINE, wrapped("Why pending: " + not_yet_explained(job, now), width, "",
                               " " * LABEL))]
    out = [(SAY, "Why pending (the latest scheduling cycle):")]
    out += [(LINE, wrapped(text, width, "  - ", "    ")) for text in lines]
    out += [(LINE, wrapped(text, width, "hint: ", "      ")) for text in hints(job, nodes)]
    start = job.get("estimated_start")
    out.append((SAY, f"Estimated start: {when(start, now)}" if start is not None else
                "Estimated start: unknown"))
    return out


def _stderr_tail(stderr: bytes) -> list[tuple]:
    lines = stderr_tail(stderr)
    if not lines:
        return []
    return [(SAY, "Last lines of its standard error (replica 0; rota logs ID --stderr for "
                  "all):")] + [(LINE, "  " + text) for text in lines]


def _attempts(history: list[dict[str, Any]], now: float) -> list[tuple]:
    """One row per attempt: when it ran, where, how it ended, its last checkpoint."""
    if not history:
        return []
    rows = []
    for a in history:
        where = ", ".join(dict.fromkeys(r["node"] for r in a.get("placement") or [])) or "-"
        started = a["launched_at"] or a["bound_at"]
        rows.append([str(a["attempt"]), f"{age(started, now)} ago",
                     f"{age(a['ended_at'], now)} ago" if a["ended_at"] else "-", where,
                     (a["end"] or "running") + (f" ({a['exit_code']})"
                                                if a["exit_code"] not in (None, 0) else ""),
                     f"{age(a['last_checkpoint_at'], now)} ago" if a["last_checkpoint_at"]
                     else "-", a["reason"] or ""])
    return [(HEADING, "Attempts"), (TABLE, ATTEMPT_COLUMNS, rows)]


def figure(value: float | None, scale: float | None = None) -> str:
    """Two decimals, or four where ``scale`` (the column's total; default: the value) is
    below 100, so that a few minutes on a fraction of a GPU do not read as nothing."""
    if value is None:
        return "-"
    return f"{value:,.{4 if abs(value if scale is None else scale) < 100 else 2}f}"


def budget_line(project: str, budget: dict[str, Any] | None) -> str | None:
    """What ``rota show`` says of the job's project budget, when it is past a limit."""
    if budget is None or budget["state"] == "ok":
        return None
    if budget["state"] == "over-hard":
        return (f"project {project} used {figure(budget['used_gpu_hours'])} GPU-hours in "
                f"{budget['month']}, at or past its hard limit of {budget['hard_gpu_hours']:g}: "
                f"its new jobs wait until {budget['resets_at']} or until an operator raises it "
                f"(rota project budget {project} --hard N); running jobs go on.")
    return (f"project {project} used {figure(budget['used_gpu_hours'])} GPU-hours in "
            f"{budget['month']}, past its soft limit of {budget['soft_gpu_hours']:g}"
            + (f" (hard limit {budget['hard_gpu_hours']:g}: new jobs wait beyond it)"
               if budget["hard_gpu_hours"] is not None else "") + ".")
