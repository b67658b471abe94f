"""``rota usage``: what was used, exactly or as fair share sees it; budgets in words.

- ``rota usage --since DATE [--until DATE] [--by project,user,queue,model]``: GPU-hours of
  ``[since, until)`` (until: now) from the attempts the server recorded, a fraction of a GPU
  counted by its share, jobs still running counted up to now; idle GPU-hours apart, and the
  cost from the queues file's ``prices``. ``--json`` prints the server's answer unchanged,
  ``--csv`` one row per line (no total) for spreadsheets.
- ``rota usage`` alone: each project's decayed GPU-hours, the figure fair share orders by
  (recent use counts most; a week-old hour counts half). Not a bill: use ``--since`` for that.

Dates are ``2026-11-01`` (midnight UTC), ``2026-11-01T09:00:00Z``, or with an offset.
"""

from __future__ import annotations

import csv
import sys
from typing import Any, List, Optional

import typer

from rota.cli.remote import EXIT_BAD_INPUT, die, print_json, talking
from rota.cli.showrows import figure
from rota.cli.tables import Column, console, fit

KEYS = ("project", "user", "queue", "model")


def usage(
    since: Optional[str] = typer.Option(
        None, "--since", metavar="DATE",
        help="Exact GPU-hours from this date (2026-11-01, UTC) or date-time on, or from a "
             "time before now: now-7days, 2h (ago), 1w."),
    until: Optional[str] = typer.Option(
        None, "--until", metavar="DATE", help="Up to this date or date-time, or now-1day "
                                              "(default: now)."),
    by: str = typer.Option("project", "--by", metavar="KEYS",
                           help="Group by any of project, user, queue, model (comma-separated)."),
    project: List[str] = typer.Option([], "--project", "-p",
                                      help="Only this project (repeatable)."),
    as_json: bool = typer.Option(False, "--json"),
    as_csv: bool = typer.Option(False, "--csv", help="One CSV row per group, for spreadsheets."),
) -> None:
    """GPU-hours and cost per project, user, queue or GPU model over dates (with --since);
    without --since, each project's decayed usage as fair share counts it."""
    if as_json and as_csv:
        die("--csv: choose --json or --csv, not both", EXIT_BAD_INPUT)
    if since is None:
        given = [o for o, v in (("--until", until), ("--csv", as_csv), ("--project", project),
                                ("--by", by != "project")) if v]
        if given:
            die(f"{given[0]}: needs --since DATE (e.g. --since 2026-11-01): exact usage is "
                "over a range of dates", EXIT_BAD_INPUT)
        return _decayed(as_json)
    keys = [k.strip() for k in by.split(",") if k.strip()]
    wrong = [k for k in keys if k not in KEYS]
    if wrong or not keys:
        die(f"--by: {wrong[0] if wrong else by!r} is not one of {', '.join(KEYS)}",
            EXIT_BAD_INPUT)
    with talking() as client:
        data = client.accounting(since, until, ",".join(keys), list(project))
    if as_json:
        print_json(data)
    elif as_csv:
        _csv(data)
    else:
        _table(data)


def _decayed(as_json: bool) -> None:
    with talking() as client:
        data = client.usage()
    if as_json:
        print_json(data)
        return
    if not data:
        print("No usage recorded yet.")
        return
    console().print(fit((Column("PROJECT"), Column("GPU-HOURS", justify="right")),
                        [[p, f"{seconds / 3600:.2f}"] for p, seconds in sorted(data.items())]))
    print("Decayed GPU-hours, as fair share counts them (a week-old hour counts half). For "
          "exact GPU-hours and cost: rota usage --since DATE.")


def _table(data: dict[str, Any]) -> None:
    by, currency = data["by"], data["currency"]
    until = "now" if data["until"] == data["now"] else data["until"]
    print(f"GPU use from {data['since']} to {until} (UTC):")
    if not data["rows"]:
        print("No GPU was held in that range (a member sees only their projects).")
        return
    columns = [Column(k.upper()) for k in by] + [
        Column("GPU-HOURS", justify="right"), Column("IDLE GPU-HOURS", justify="right", drop=1)]
    if currency:
        columns.append(Column(f"COST ({currency})", justify="right"))
    total = data["total"]
    rows = []
    for line in [*data["rows"], {**total, by[0]: "TOTAL"}]:
        row = [str(line.get(k, "")) for k in by] + [
            figure(line["gpu_hours"], total["gpu_hours"]),
            figure(line["idle_gpu_hours"], total["gpu_hours"])]
        if currency:
            row.append(figure(line["cost"], total["cost"]))
        rows.append(row)
    console().print(fit(columns, rows))
    if data["unpriced_models"]:
        print(f"No price for {', '.join(data['unpriced_models'])}: "
              f"{figure(data['total']['unpriced_gpu_hours'])} GPU-hours are not in COST; an "
              "operator adds prices: to the queues file (rota queue apply FILE).")
    elif not currency:
        print("No prices set: an operator adds prices: (a currency and a price per GPU-hour "
              "of each model) to the queues file, then COST shows.")


def _csv(data: dict[str, Any]) -> None:
    by = data["by"]
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow([*by, "gpu_hours", "idle_gpu_hours", "cost", "currency",
                  "unpriced_gpu_hours"])
    for line in data["rows"]:
        out.writerow([*(line[k] for k in by), line["gpu_hours"], line["idle_gpu_hours"],
                      "" if line["cost"] is None else line["cost"], data["currency"] or "",
                      line["unpriced_gpu_hours"]])


def budget_words(budget: dict[str, Any] | None) -> str:
    """``12.5 of 10 GPU-h soft, 20 hard (2026-11): over soft limit``; ``-`` without a budget."""
    if budget is None:
        return "-"
    limits = [f"{budget[k]:g} {w}" for k, w in (("soft_gpu_hours", "soft"),
                                                  ("hard_gpu_hours", "hard"))
              if budget[k] is not None]
    state = {"ok": "", "over-soft": ": over soft limit",
             "over-hard": ": over hard limit, new jobs wait"}[budget["state"]]
    return (f"{figure(budget['used_gpu_hours'])} GPU-h used of {', '.join(limits)} "
            f"({budget['month']}){state}")
