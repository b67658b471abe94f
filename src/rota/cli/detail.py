"""``rota show``: one job in words, from what the store holds about it.

- state, with the reason of its last move (rejected, preempted, cancelled, exit code);
- what it asked for and where it runs (node and GPUs per replica);
- for a pending job, the latest scheduling cycle's wait reasons as sentences
  (``rota.core.jobwords.sentence_among``: a node that takes no new job, drained or cordoned, is
  named where it is why capacity is missing), a hint, and the estimated start; a job no cycle
  has explained yet is shown as queued, with how long it has been;
- for a failed job, the last lines of its standard error (replica 0), where a missing program
  or a Python traceback shows;
- a note when its queue no longer admits its project (the binding changed after the job was
  accepted: it stays) or was deleted;
- who holds it back and why, and the time before which it may not start;
- its project's budget this month, when the project is past its soft or hard limit;
- its attempts (when, where, how each ended) and its history (events).

Every line fits the terminal: sentences wrap at spaces under their label and keep commands
whole, the attempts and events tables wrap their reasons and messages (``rota.cli.tables``).
The words themselves come from ``rota.core.jobwords``, which the web dashboard's job page
shares.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.text import Text

from rota.cli.remote import age, placement, when
from rota.cli.accounting import budget_line
from rota.cli.tables import Column, fit, wrapped
from rota.core.jobwords import (
    hints, not_yet_explained, queue_note, reason_of, request_text, state_text, stderr_tail,
    why_lines,
)

__all__ = ["hints", "queue_note", "reason_of", "render_job", "request_text", "why_lines"]

LABEL = 11  # "Requests:  " and the like: continuation lines are indented under the value


def render_job(job: dict[str, Any], events: list[dict[str, Any]], console: Console,
               nodes: list[dict[str, Any]] = (), stderr: bytes = b"") -> None:
    def line(label: str, text: str) -> None:
        _say(console, wrapped(text, console.width, f"{label:<{LABEL}}", " " * LABEL))

    title = f"Job {job['id']}" + (f" {job['name']}" if job["name"] else "")
    head = Text(wrapped(f"{title}  project {job['project']}, queue {job['queue']}, user "
                        f"{job['user']}, priority {job['priority']}, {job['kind']}",
                        console.width, "", "    "))
    head.stylize("bold", 0, len(title))
    console.print(head, soft_wrap=True)
    line("State:", state_text(job))
    line("Submitted:", f"{age(job['submit_time'])} ago"
                       + (f", attempt #{job['attempts']}"
                          if job["attempts"] else ""))
    line("Requests:", request_text(job) + (f", walltime {_dur(job['walltime_s'])}"
                                           if job["walltime_s"] else ""))
    if job.get("placement"):
        line("Placement:", placement(job) + (f" (flavour {job['flavor']})"
                                             if job.get("flavor") else ""))
        if job.get("started_at"):
            line("Started:", when(job["started_at"]))
    note = queue_note(job)
    if note:
        line("Queue:", note)
    if job.get("held"):
        line("Held:", f"{job['held']} (rota release {job['id']} lets it go)")
    budget = budget_line(job["project"], job.get("budget"))
    if budget is not None:
        line("Budget:", budget)
    if job["state"] == "pending":
        _pending(job, list(nodes), console)
    elif job["state"] == "failed":
        for text in why_lines(job):
            _say(console, wrapped(text, console.width, "  - ", "    "))
        _stderr_tail(stderr, console)
    _attempts(job.get("history") or [], console)
    _events(events, console)


def _say(console: Console, text: str) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _attempts(history: list[dict[str, Any]], console: Console) -> None:
    """One line per attempt: when it ran, where, how it ended, its last checkpoint."""
    if not history:
        return
    rows = []
    for a in history:
        where = ", ".join(dict.fromkeys(r["node"] for r in a.get("placement") or [])) or "-"
        started = a["launched_at"] or a["bound_at"]
        rows.append([str(a["attempt"]), f"{age(started)} ago",
                     f"{age(a['ended_at'])} ago" if a["ended_at"] else "-", where,
                     (a["end"] or "running") + (f" ({a['exit_code']})"
                                                if a["exit_code"] not in (None, 0) else ""),
                     f"{age(a['last_checkpoint_at'])} ago" if a["last_checkpoint_at"] else "-",
                     a["reason"] or ""])
    console.print("[bold]Attempts[/]")
    columns = [Column("#"), Column("STARTED"), Column("ENDED", drop=2),
               Column("WHERE", wrap=True), Column("END"), Column("CHECKPOINT", drop=1),
               Column("REASON", wrap=True)]
    console.print(fit(columns, rows, console.width))


def _pending(job: dict[str, Any], nodes: list[dict[str, Any]], console: Console) -> None:
    lines = why_lines(job, nodes, time.time())
    if not lines:
        _say(console, wrapped("Why pending: " + not_yet_explained(job, time.time()),
                              console.width, "", " " * LABEL))
        return
    console.print("Why pending (the latest scheduling cycle):")
    for text in lines:
        _say(console, wrapped(text, console.width, "  - ", "    "))
    for text in hints(job, nodes):
        _say(console, wrapped(text, console.width, "hint: ", "      "))
    start = job.get("estimated_start")
    console.print(f"Estimated start: {when(start)}" if start is not None else
                  "Estimated start: unknown")


def _stderr_tail(stderr: bytes, console: Console) -> None:
    lines = stderr_tail(stderr)
    if not lines:
        return
    console.print("Last lines of its standard error (replica 0; rota logs ID --stderr for all):")
    for text in lines:
        _say(console, "  " + text)


def _dur(seconds: float) -> str:
    from rota.cli.units import duration
    return duration(seconds)


def _events(events: list[dict[str, Any]], console: Console) -> None:
    if not events:
        return
    console.print("[bold]Events[/]")
    columns = [Column("WHEN"), Column("KIND"), Column("MESSAGE", wrap=True)]
    console.print(fit(columns, [[f"{age(e['time'])} ago", e["kind"], e["message"]]
                                for e in events], console.width))
