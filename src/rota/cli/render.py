"""Human output of ``rota plan``: rich tables from the plan report, a summary line, hints.

Reads only the report dictionary (the same data ``--json`` prints), so the two outputs never
disagree. Times are shown relative to the plan's ``now`` (``in 1h30m``).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

from rota.cli.tables import Column, fit
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


def _table(console: Console, title: str, columns: list[Column], rows: list[list[str]]) -> None:
    console.print(fit(columns, rows, console.width, title=title, boxed=True))


def render(report: dict[str, Any], console: Console, hints: list[str] = ()) -> None:
    p = report["policy"]
    console.print(f"Plan at t={report['now']:g} with policy [bold]{p['name']}[/] "
                  f"(order {p['order']}, placement {p['placement']}, preemption "
                  f"{p['preemption']}, backfill {p['backfill']}), {report['cycles']} cycles.")
    job, queue, why = Column("Job"), Column("Queue", drop=1), Column("Why", wrap=True)
    if report["placements"]:
        _table(console, "Placed", [job, queue, Column("Flavour", drop=2),
                                   Column("Where", wrap=True), Column("Notes", wrap=True)],
               [[x["job"], x["queue"], x["flavor"], where(x["replicas"]), ", ".join(
                   n for n, on in (("borrowing", x["borrowing"]), ("backfilled", x["backfilled"]))
                   if on)] for x in report["placements"]])
    if report["preemptions"]:
        _table(console, "Preempted", [job, Column("By"), why, Column("Grace", drop=1),
                                      Column("Then", wrap=True)],
               [[x["job"], x["by"], x["reason"], duration(x["grace_s"]), x["then"]]
                for x in report["preemptions"]])
    if report["reservations"]:
        _table(console, "Reserved", [job, Column("Starts"), Column("Where", wrap=True)],
               [[x["job"], f"in {duration(x['start_in_s'])}", where(x["replicas"])]
                for x in report["reservations"]])
    if report["pending"]:
        _table(console, "Pending", [job, queue, why, Column("Estimated start", wrap=True)],
               [[x["job"], x["queue"], x["message"], "unknown" if x["estimated_start_in_s"]
                 is None else f"in {duration(x['estimated_start_in_s'])}"]
                for x in report["pending"]])
    if report["rejected"]:
        _table(console, "Rejected", [job, why], [[x["job"], x["message"]]
                                                 for x in report["rejected"]])
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
