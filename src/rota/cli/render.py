"""Human output of ``rota plan``: rich tables from the plan report, a summary line, hints.

Reads only the report dictionary (the same data ``--json`` prints), so the two outputs never
disagree. Times are shown relative to the plan's ``now`` (``in 1h30m``).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from rota.cli.units import amount, duration

__all__ = ["duration", "render", "summary", "where"]


def where(replicas: list[dict[str, Any]]) -> str:
    """``gpu-0: GPU 0,1 | gpu-1: GPU 2,3``; a fraction shows its share and memory."""
    out = []
    for rep in replicas:
        gpus = rep["gpus"]
        if not gpus:
            out.append(f"{rep['node']}: no GPU")
        elif len(gpus) == 1 and gpus[0]["share"] < 1:
            g = gpus[0]
            out.append(f"{rep['node']}: GPU {g['index']} ({g['share']:g} share, "
                       f"{amount('memory', g['memory_mib'])})")
        else:
            out.append(f"{rep['node']}: GPU {','.join(str(g['index']) for g in gpus)}")
    return "\n".join(out)


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", show_lines=False)
    for c in columns:
        table.add_column(c, overflow="fold")
    return table


def render(report: dict[str, Any], console: Console, hints: list[str] = ()) -> None:
    p = report["policy"]
    console.print(f"Plan at t={report['now']:g} with policy [bold]{p['name']}[/] "
                  f"(order {p['order']}, placement {p['placement']}, preemption "
                  f"{p['preemption']}, backfill {p['backfill']}), {report['cycles']} cycles.")
    if report["placements"]:
        t = _table("Placed", "Job", "Queue", "Flavour", "Where", "Notes")
        for x in report["placements"]:
            notes = [n for n, on in (("borrowing", x["borrowing"]), ("backfilled", x["backfilled"])) if on]
            t.add_row(x["job"], x["queue"], x["flavor"], where(x["replicas"]), ", ".join(notes))
        console.print(t)
    if report["preemptions"]:
        t = _table("Preempted", "Job", "By", "Why", "Grace", "Then")
        for x in report["preemptions"]:
            t.add_row(x["job"], x["by"], x["reason"], duration(x["grace_s"]), x["then"])
        console.print(t)
    if report["reservations"]:
        t = _table("Reserved", "Job", "Starts", "Where")
        for x in report["reservations"]:
            t.add_row(x["job"], f"in {duration(x['start_in_s'])}", where(x["replicas"]))
        console.print(t)
    if report["pending"]:
        t = _table("Pending", "Job", "Queue", "Why", "Estimated start")
        for x in report["pending"]:
            start = x["estimated_start_in_s"]
            t.add_row(x["job"], x["queue"], x["message"],
                      "unknown" if start is None else f"in {duration(start)}")
        console.print(t)
    if report["rejected"]:
        t = _table("Rejected", "Job", "Why")
        for x in report["rejected"]:
            t.add_row(x["job"], x["message"])
        console.print(t)
    console.print(summary(report))
    if not report["converged"]:
        console.print(f"[yellow]note:[/] stopped after {report['cycles']} cycles without settling; "
                      "the plan above is the state at that point.")
    for line in hints:
        console.print(f"[dim]hint:[/] {line}")


def summary(report: dict[str, Any]) -> str:
    s = report["summary"]
    parts = [f"{s['placed']} placed", f"{s['preempted']} preempted"]
    if s["reserved"]:
        parts.append(f"{s['reserved']} reserved")
    parts += [f"{s['pending']} pending", f"{s['rejected']} rejected"]
    return ", ".join(parts)
