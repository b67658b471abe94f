"""Routes about what was used and what it may cost: exact accounting, project budgets and
decayed usage.

- ``GET /v1/accounting?since=&until=&by=project,model[&project=...]``: GPU-hours, idle
  GPU-hours and cost of ``[since, until)`` (``until`` defaults to now) grouped by any of
  ``project``, ``user``, ``queue``, ``model``, from the attempts the store recorded
  (``rota.store.accounting``); attempts still running count up to now. A member's answer has
  only its projects' rows (it asks for another project: that project's rows are simply not
  there, as its jobs are not); an operator's has every project's. Times are ISO 8601 dates or
  date-times (UTC when no zone is given) or seconds since the epoch.
- ``PUT /v1/projects/{name}/budget``: an operator sets a project's soft and hard limits in
  GPU-hours per calendar month (UTC); both null remove the budget. A member is refused (403).
- ``GET /v1/usage``: decayed GPU-hours per project the caller may see (``rota usage``).

Idle: the GPU-hours of attempts whose GPUs were measured below their idle policy's utilisation
threshold (``rota.control.idle``); only attempts under a policy with ``gpu_util_below`` are
measured, so the others show none.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Depends, Query
from pydantic import BaseModel, ConfigDict

from rota.api.accounting import budget_view, iso, parse_time
from rota.api.auth import principal
from rota.api.errors import Forbidden
from rota.api.state import Api, api_of
from rota.core import InvalidSpec
from rota.core.accounting import Line, check_by
from rota.store import Principal

router = APIRouter()

IDLE_MEANS = ("GPU-hours of attempts whose GPU utilisation was measured below their idle "
              "policy's gpu_util_below threshold; jobs without such a policy are not measured")


class BudgetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    soft_gpu_hours: float | None = None
    hard_gpu_hours: float | None = None


def _line(line: Line, by: tuple[str, ...], currency: str | None) -> dict[str, Any]:
    return {**dict(zip(by, line.key)), "gpu_hours": round(line.gpu_hours, 6),
            "idle_gpu_hours": round(line.idle_gpu_hours, 6),
            "cost": None if currency is None else round(line.cost, 6),
            "unpriced_gpu_hours": round(line.unpriced_gpu_hours, 6)}


@router.get("/v1/accounting")
def accounting(since: str = Query(..., max_length=64),
               until: str | None = Query(None, max_length=64),
               by: str = Query("project", max_length=64),
               project: list[str] | None = Query(None),
               who: Principal = Depends(principal),
               api: Api = Depends(api_of)) -> dict[str, Any]:
    now = api.clock()
    start = parse_time(since, "since", now)
    end = now if until is None else parse_time(until, "until", now)
    if end <= start and until is None:
        raise InvalidSpec("since", f"{iso(start)} is not in the past (now is {iso(now)})")
    if end <= start:
        raise InvalidSpec("until", f"must be after since ({iso(start)}), got {iso(end)}")
    keys = check_by(k.strip() for k in by.split(",") if k.strip())
    names = None if project is None else set(project)
    if not who.operator:
        names = set(who.projects) if names is None else names & set(who.projects)
    report, currency = api.store.report(start, end, keys, now, names)
    return {"since": iso(start), "until": iso(end), "now": iso(now), "by": list(keys),
            "currency": currency,
            "rows": [_line(line, keys, currency) for line in report.lines],
            "total": _line(report.total, (), currency),
            "unpriced_models": list(report.unpriced_models) if currency else [],
            "idle": IDLE_MEANS}


@router.put("/v1/projects/{name}/budget")
def set_budget(name: str, body: BudgetBody = Body(...),
               who: Principal = Depends(principal),
               api: Api = Depends(api_of)) -> dict[str, Any]:
    if not who.operator:
        raise Forbidden("only an operator sets a project's budget; ask one to run "
                        f"rota project budget {name} --soft GPU_HOURS --hard GPU_HOURS")
    api.store.set_budget(name, body.soft_gpu_hours, body.hard_gpu_hours)
    api.changed()
    status = api.store.budget_status(api.clock(), [name]).get(name)
    return {"name": name, "budget": None if status is None else budget_view(status)}


@router.get("/v1/usage")
def usage(who: Principal = Depends(principal),
          api: Api = Depends(api_of)) -> dict[str, float]:
    return api.reads.usage(who)
