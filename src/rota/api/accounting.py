"""Routes about what was used and what it may cost: exact accounting and project budgets.

- ``GET /v1/accounting?since=&until=&by=project,model[&project=...]``: GPU-hours, idle
  GPU-hours and cost of ``[since, until)`` (``until`` defaults to now) grouped by any of
  ``project``, ``user``, ``queue``, ``model``, from the attempts the store recorded
  (``rota.store.accounting``); attempts still running count up to now. A member's answer has
  only its projects' rows (it asks for another project: that project's rows are simply not
  there, as its jobs are not); an operator's has every project's. Times are ISO 8601 dates or
  date-times (UTC when no zone is given) or seconds since the epoch.
- ``PUT /v1/projects/{name}/budget``: an operator sets a project's soft and hard limits in
  GPU-hours per calendar month (UTC); both null remove the budget. A member is refused (403).
- ``budget_view``: a project's budget, what it used this month and the state it is in, for
  ``GET /v1/projects`` and ``GET /v1/jobs/{id}``.

Idle: the GPU-hours of attempts whose GPUs were measured below their idle policy's utilisation
threshold (``rota.control.idle``); only attempts under a policy with ``gpu_util_below`` are
measured, so the others show none.
"""

from __future__ import annotations

import math
from datetime import date, datetime, timezone
from typing import Any, Callable

from fastapi import Body, Depends, FastAPI, Query
from pydantic import BaseModel, ConfigDict

from rota.api.errors import Forbidden
from rota.core import InvalidSpec
from rota.core.accounting import KEYS, BudgetStatus, Line, check_by
from rota.store import Principal, Store

IDLE_MEANS = ("GPU-hours of attempts whose GPU utilisation was measured below their idle "
              "policy's gpu_util_below threshold; jobs without such a policy are not measured")


class BudgetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    soft_gpu_hours: float | None = None
    hard_gpu_hours: float | None = None


def parse_time(value: str, field: str) -> float:
    """An ISO 8601 date (its midnight, UTC), date-time (UTC without a zone) or epoch seconds."""
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise InvalidSpec(field, f"must be a finite number of seconds, got {value!r}")
        return seconds
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise InvalidSpec(field, "expected a date such as 2026-11-01, a date-time such as "
                                     f"2026-11-01T09:00:00Z, or epoch seconds; got {value!r}"
                              ) from None
        when = datetime(day.year, day.month, day.day)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def budget_view(status: BudgetStatus) -> dict[str, Any]:
    return {"month": status.month, "soft_gpu_hours": status.budget.soft,
            "hard_gpu_hours": status.budget.hard,
            "used_gpu_hours": round(status.used_gpu_hours, 6), "state": str(status.state),
            "resets_at": iso(status.month_end)}


def _line(line: Line, by: tuple[str, ...], currency: str | None) -> dict[str, Any]:
    return {**dict(zip(by, line.key)), "gpu_hours": round(line.gpu_hours, 6),
            "idle_gpu_hours": round(line.idle_gpu_hours, 6),
            "cost": None if currency is None else round(line.cost, 6),
            "unpriced_gpu_hours": round(line.unpriced_gpu_hours, 6)}


def add_accounting_routes(app: FastAPI, store: Store, clock: Callable[[], float],
                          principal: Callable[..., Principal],
                          changed: Callable[[], None]) -> None:
    @app.get("/v1/accounting")
    def accounting(since: str = Query(..., max_length=64),
                   until: str | None = Query(None, max_length=64),
                   by: str = Query("project", max_length=64),
                   project: list[str] | None = Query(None),
                   who: Principal = Depends(principal)) -> dict[str, Any]:
        now = clock()
        start = parse_time(since, "since")
        end = now if until is None else parse_time(until, "until")
        if end <= start and until is None:
            raise InvalidSpec("since", f"{iso(start)} is not in the past (now is {iso(now)})")
        if end <= start:
            raise InvalidSpec("until", f"must be after since ({iso(start)}), got {iso(end)}")
        keys = check_by(k.strip() for k in by.split(",") if k.strip())
        names = None if project is None else set(project)
        if not who.operator:
            names = set(who.projects) if names is None else names & set(who.projects)
        report, currency = store.report(start, end, keys, now, names)
        return {"since": iso(start), "until": iso(end), "now": iso(now), "by": list(keys),
                "currency": currency,
                "rows": [_line(line, keys, currency) for line in report.lines],
                "total": _line(report.total, (), currency),
                "unpriced_models": list(report.unpriced_models) if currency else [],
                "idle": IDLE_MEANS}

    @app.put("/v1/projects/{name}/budget")
    def set_budget(name: str, body: BudgetBody = Body(...),
                   who: Principal = Depends(principal)) -> dict[str, Any]:
        if not who.operator:
            raise Forbidden("only an operator sets a project's budget; ask one to run "
                            f"rota project budget {name} --soft GPU_HOURS --hard GPU_HOURS")
        store.set_budget(name, body.soft_gpu_hours, body.hard_gpu_hours)
        changed()
        status = store.budget_status(clock(), [name]).get(name)
        return {"name": name, "budget": None if status is None else budget_view(status)}


__all__ = ["KEYS", "add_accounting_routes", "budget_view", "parse_time"]
