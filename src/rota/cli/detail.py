"""``rota show``: one job in words, from what the store holds about it.

- state, with the reason of its last move (rejected, preempted, cancelled, exit code);
- what it asked for and where it runs (node and GPUs per replica);
- for a pending job, the latest scheduling cycle's wait reasons as sentences
  (``rota.cli.explain.sentence_among``: a node that takes no new job, drained or cordoned, is
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
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from rota.cli.accounting import budget_line
from rota.cli.explain import amount, closed_nodes, hint, sentence_among
from rota.cli.remote import age, gpus, placement, when
from rota.cli.tables import Column, fit, wrapped
from rota.core import Reason, ReasonCode

STDERR_LINES = 10
LABEL = 11  # "Requests:  " and the like: continuation lines are indented under the value


def reason_of(data: dict[str, Any]) -> Reason | None:
    try:
        return Reason(ReasonCode(data["code"]), data.get("resource"), data.get("requested"),
                      data.get("free"), data.get("capacity"), data.get("detail") or "",
                      data.get("limit"))
    except (KeyError, ValueError, TypeError):
        return None


def why_lines(job: dict[str, Any], nodes: list[dict[str, Any]] = ()) -> list[str]:
    """Sentences for a job's stored wait (or reject) reasons."""
    out = []
    for data in job.get("wait_reasons") or []:
        reason = reason_of(data)
        out.append(sentence_among(reason, list(nodes)) if reason is not None
                   else str(data.get("detail") or data))
    return list(dict.fromkeys(out))


def hints(job: dict[str, Any], nodes: list[dict[str, Any]] = ()) -> list[str]:
    found = [hint(r) for d in job.get("wait_reasons") or [] if (r := reason_of(d)) is not None]
    if nodes and closed_nodes(list(nodes)):
        found.append("an operator puts a node back in service with rota node uncordon NAME")
    return list(dict.fromkeys(h for h in found if h))


def request_text(job: dict[str, Any]) -> str:
    r = job["request"]
    parts = [f"{amount('cpu', r['cpu_milli'] / 1000)}", amount("memory", r["memory_mib"])]
    g = gpus({"request": r, "replicas": 1})
    if g != "-":
        parts.append(f"GPU {g}" + (f" of {', '.join(r['gpu']['models'])}"
                                   if r["gpu"]["models"] else ""))
    per = "per replica, " if job["replicas"] > 1 else ""
    return ", ".join(parts) + f" ({per}{job['replicas']} replica" + \
        ("s)" if job["replicas"] > 1 else ")")


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
    line("State:", _state(job))
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


def _state(job: dict[str, Any]) -> str:
    state = job["state"]
    detail = f" ({job['reason']})" if job["reason"] else ""
    if job.get("exit_code") is not None:
        detail += f", exit code {job['exit_code']}"
    if job.get("cancel_requested") and state not in ("cancelled", "succeeded", "failed"):
        detail += ", cancel requested"
    return state + detail


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


def queue_note(job: dict[str, Any]) -> str | None:
    """What changed about the job's queue since it was accepted; None: nothing to say."""
    admits = job.get("queue_admits_project", True)
    if admits is None:
        return f"queue {job['queue']} has been deleted; the job keeps its name in its history."
    if admits is False and job["state"] not in ("succeeded", "failed", "cancelled"):
        return (f"queue {job['queue']} no longer admits project {job['project']}; this job was "
                "accepted before that and stays (new jobs of the project need another queue).")
    return None


def _pending(job: dict[str, Any], nodes: list[dict[str, Any]], console: Console) -> None:
    lines = why_lines(job, nodes)
    if not lines:
        _say(console, wrapped(f"Why pending: queued {age(job['submit_time'])} ago in "
                              f"{job['queue']}; no scheduling cycle has recorded a reason for "
                              "it to wait yet.", console.width, "", " " * LABEL))
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
    lines = stderr.decode("utf-8", "replace").rstrip("\n").splitlines()[-STDERR_LINES:]
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
