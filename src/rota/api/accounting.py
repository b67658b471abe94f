"""What the accounting routes (``rota.api.accounting_routes``) and the reads of projects and
jobs share: times as the API reads and writes them, and the view of a project's budget.

- ``parse_time``: ISO 8601 dates or date-times (UTC when no zone is given) or seconds since
  the epoch;
- ``budget_view``: a project's budget, what it used this month and the state it is in, for
  ``GET /v1/projects`` and ``GET /v1/jobs/{id}``.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timezone
from typing import Any

from rota.core import InvalidSpec
from rota.core.accounting import BudgetStatus


RELATIVE = re.compile(r"^(?:now)?\s*-?\s*(\d+(?:\.\d+)?)\s*([a-z]+)$")
UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
         "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
         "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400,
         "w": 604800, "week": 604800, "weeks": 604800}


def parse_time(value: str, field: str, now: float | None = None) -> float:
    """An ISO 8601 date (its midnight, UTC), date-time (UTC without a zone) or epoch seconds;
    with ``now``, also a time relative to it, as ``sacct --starttime`` reads one: ``now``,
    ``now-7days``, ``now-2hours``, or a duration ago (``2h``, ``7d``, ``1w``, ``30m``)."""
    text = value.strip()
    if now is not None:
        relative = _relative(text.lower(), now)
        if relative is not None:
            return relative
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
            relative = ", now-7days or 2h (ago)" if now is not None else ""
            raise InvalidSpec(field, "expected a date such as 2026-11-01, a date-time such as "
                                     f"2026-11-01T09:00:00Z, epoch seconds{relative}; got "
                                     f"{value!r}") from None
        when = datetime(day.year, day.month, day.day)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def _relative(text: str, now: float) -> float | None:
    """``now``, ``now-N<unit>`` or ``N<unit>`` (ago), else None (not a relative time)."""
    if text == "now":
        return now
    if not (text.startswith("now-") or text[:1].isdigit()):
        return None
    m = RELATIVE.match(text)
    if m is None or m[2] not in UNITS or (text[:1].isdigit() and "-" in text):
        return None
    return now - float(m[1]) * UNITS[m[2]]


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def budget_view(status: BudgetStatus) -> dict[str, Any]:
    return {"month": status.month, "soft_gpu_hours": status.budget.soft,
            "hard_gpu_hours": status.budget.hard,
            "used_gpu_hours": round(status.used_gpu_hours, 6), "state": str(status.state),
            "resets_at": iso(status.month_end)}


__all__ = ["budget_view", "iso", "parse_time"]
