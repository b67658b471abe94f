"""What the accounting routes (``rota.api.accounting_routes``) and the reads of projects and
jobs share: times as the API reads and writes them, and the view of a project's budget.

- ``parse_time``: ISO 8601 dates or date-times (UTC when no zone is given) or seconds since
  the epoch;
- ``budget_view``: a project's budget, what it used this month and the state it is in, for
  ``GET /v1/projects`` and ``GET /v1/jobs/{id}``.
"""

from __future__ import annotations

import math
from datetime import date, datetime, timezone
from typing import Any

from rota.core import InvalidSpec
from rota.core.accounting import BudgetStatus


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


__all__ = ["budget_view", "iso", "parse_time"]
