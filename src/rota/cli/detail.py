"""``rota show``: one job in words, from what the store holds about it.

- state, with the reason of its last move (rejected, preempted, cancelled, exit code);
- what it asked for and where it runs (node and GPUs per replica);
- for a pending job, the latest scheduling cycle's wait reasons as sentences
  (``rota.cli.explain.sentence``), a hint, and the estimated start; a job no cycle has
  explained yet is shown as queued, with how long it has been;
- a note when its queue no longer admits its project (the binding changed after the job was
  accepted: it stays) or was deleted;
- who holds it back and why, and the time before which it may not start;
- its attempts (when, where, how each ended) and its history (events).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from rota.cli.explain import amount, hint, sentence
from rota.cli.remote import age, gpus, placement, when
from rota.core import Reason, ReasonCode


def reason_of(data: dict[str, Any]) -> Reason | None:
    try:
        return Reason(ReasonCode(data["code"]), data.get("resource"), data.get("requested"),
                      data.get("free"), data.get("capacity"), data.get("detail") or "")
    except (KeyError, ValueError, TypeError):
        return None


def why_lines(job: dict[str, Any]) -> list[str]:
    """Sentences for a job's stored wait (or reject) reasons."""
    out = []
    for data in job.get("wait_reasons") or []:
        reason = reason_of(data)
        out.append(sentence(reason) if reason is not None else str(data.get("detail") or data))
    return out


def hints(job: dict[str, Any]) -> list[str]:
    found = [hint(r) for d in job.get("wait_reasons") or [] if (r := reason_of(d)) is not None]
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


def render_job(job: dict[str, Any], events: list[dict[str, Any]], console: Console) -> None:
    name = f" {job['name']}" if job["name"] else ""
    console.print(f"[bold]Job {job['id']}{name}[/]  project {job['project']}, queue "
                  f"{job['queue']}, user {job['user']}, priority {job['priority']}, {job['kind']}")
    state = job["state"]
    detail = f" ({job['reason']})" if job["reason"] else ""
    if job.get("exit_code") is not None:
        detail += f", exit code {job['exit_code']}"
    if job.get("cancel_requested") and state not in ("cancelled", "succeeded", "failed"):
        detail += ", cancel requested"
    console.print(f"State:     {state}{detail}")
    console.print(f"Submitted: {age(job['submit_time'])} ago"
                  + (f", attempt {job['attempts'] + 1}" if job["attempts"] else ""))
    console.print(f"Requests:  {request_text(job)}"
                  + (f", walltime {_dur(job['walltime_s'])}" if job["walltime_s"] else ""))
    if job.get("placement"):
        console.print(f"Placement: {placement(job)}" + (f" (flavour {job['flavor']})"
                                                          if job.get("flavor") else ""))
        if job.get("started_at"):
            console.print(f"Started:   {when(job['started_at'])}")
    note = queue_note(job)
    if note:
        console.print(f"Queue:     {note}")
    if job.get("held"):
        console.print(f"Held:      {job['held']} (rota release {job['id']} lets it go)")
    if state == "pending":
        _pending(job, console)
    elif state == "failed" and job.get("wait_reasons"):
        for line in why_lines(job):
            console.print(f"  - {line}")
    _attempts(job.get("history") or [], console)
    _events(events, console)


def _attempts(history: list[dict[str, Any]], console: Console) -> None:
    """One line per attempt: when it ran, where, how it ended, its last checkpoint."""
    if not history:
        return
    table = Table(title="Attempts", title_justify="left", box=None, header_style="bold")
    for column in ("#", "STARTED", "ENDED", "WHERE", "END", "CHECKPOINT", "REASON"):
        table.add_column(column, overflow="fold")
    for a in history:
        where = ", ".join(dict.fromkeys(r["node"] for r in a.get("placement") or [])) or "-"
        started = a["launched_at"] or a["bound_at"]
        table.add_row(str(a["attempt"]), f"{age(started)} ago",
                      f"{age(a['ended_at'])} ago" if a["ended_at"] else "-", where,
                      (a["end"] or "running") + (f" ({a['exit_code']})"
                                                 if a["exit_code"] not in (None, 0) else ""),
                      f"{age(a['last_checkpoint_at'])} ago" if a["last_checkpoint_at"] else "-",
                      a["reason"] or "")
    console.print(table)


def queue_note(job: dict[str, Any]) -> str | None:
    """What changed about the job's queue since it was accepted; None: nothing to say."""
    admits = job.get("queue_admits_project", True)
    if admits is None:
        return f"queue {job['queue']} has been deleted; the job keeps its name in its history."
    if admits is False and job["state"] not in ("succeeded", "failed", "cancelled"):
        return (f"queue {job['queue']} no longer admits project {job['project']}; this job was "
                "accepted before that and stays (new jobs of the project need another queue).")
    return None


def _pending(job: dict[str, Any], console: Console) -> None:
    lines = why_lines(job)
    if lines:
        console.print("Why pending (the latest scheduling cycle):")
        for line in lines:
            console.print(f"  - {line}")
        for text in hints(job):
            console.print(f"[dim]hint:[/] {text}")
        start = job.get("estimated_start")
        console.print(f"Estimated start: {when(start)}" if start is not None else
                      "Estimated start: unknown")
    else:
        console.print(f"Why pending: queued {age(job['submit_time'])} ago in {job['queue']}; "
                      "no scheduling cycle has recorded a reason for it to wait yet.")


def _dur(seconds: float) -> str:
    from rota.cli.units import duration
    return duration(seconds)


def _events(events: list[dict[str, Any]], console: Console) -> None:
    if not events:
        return
    table = Table(title="Events", title_justify="left", box=None, header_style="bold")
    for column in ("WHEN", "KIND", "MESSAGE"):
        table.add_column(column, overflow="fold")
    for e in events:
        table.add_row(f"{age(e['time'])} ago", e["kind"], e["message"])
    console.print(table)
