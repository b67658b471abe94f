"""Exact accounting: GPU-hours over a time range, their cost, and budgets. Pure arithmetic.

Vocabulary:

- An *allocation* is one attempt of a job holding GPUs of one model: ``gpus`` GPUs (a fraction
  counts by its share: one replica on half a GPU holds 0.5; two replicas of two GPUs each hold
  4.0) from ``start`` (the attempt was bound to its devices) to ``end`` (it left them; None: it
  still holds them, and counts up to ``now``). An attempt on GPUs of two models is two
  allocations.
- An *idle span* has the same shape: a time the attempt's GPUs were allocated and measured
  idle (``rota.control.idle``). Its GPU-hours are part of the allocation's, shown apart.
- A *range* ``[since, until)``: of each allocation only the part inside it counts, so that the
  months of a year add up to the year, to the second.
- *Prices*: per GPU model, a price per GPU-hour in one currency. A model without a price costs
  nothing in ``cost``; its GPU-hours are in ``unpriced_gpu_hours`` instead, so a total never
  hides them.
- A *budget*: per project and calendar month (UTC), a soft and a hard limit in GPU-hours.
  Reaching the soft limit warns; reaching the hard one keeps the project's pending jobs
  waiting (reason ``budget``) until the month ends or the limit is raised. Running jobs go on.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from rota.core.errors import InvalidSpec

KEYS = ("project", "user", "queue", "model")  # what a report may be grouped by
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Allocation:
    project: str
    user: str
    queue: str
    model: str
    gpus: float
    start: float
    end: float | None = None  # None: still held

    def key(self, by: Sequence[str]) -> tuple[str, ...]:
        return tuple(getattr(self, k) for k in by)

    def seconds_in(self, since: float, until: float, now: float) -> float:
        """How long of ``[since, until)`` it held its GPUs (up to ``now`` while it holds them)."""
        end = now if self.end is None else self.end
        return max(0.0, min(end, until) - max(self.start, since))


@dataclass(slots=True)
class Line:
    """One row of a report: the values of its ``by`` keys and what they add up to."""

    key: tuple[str, ...]
    gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    cost: float = 0.0
    unpriced_gpu_hours: float = 0.0


@dataclass(frozen=True, slots=True)
class Report:
    by: tuple[str, ...]
    lines: tuple[Line, ...]
    total: Line
    unpriced_models: tuple[str, ...] = ()


def check_by(by: Iterable[str]) -> tuple[str, ...]:
    """The keys a report is grouped by, in the order given; ``InvalidSpec`` names a wrong one."""
    out = tuple(dict.fromkeys(by))
    wrong = [k for k in out if k not in KEYS]
    if wrong or not out:
        raise InvalidSpec("by", f"{wrong[0] if wrong else 'nothing'!r} is not one of "
                                f"{', '.join(KEYS)}")
    return out


def tally(allocations: Iterable[Allocation], idle: Iterable[Allocation], by: Sequence[str],
          since: float, until: float, now: float,
          prices: Mapping[str, float] | None = None) -> Report:
    """GPU-hours, idle GPU-hours and cost of ``[since, until)`` grouped by ``by``; lines in
    order of their keys. ``prices``: model -> price of one GPU-hour."""
    by = check_by(by)
    prices = prices or {}
    lines: dict[tuple[str, ...], Line] = {}
    unpriced: set[str] = set()
    for a in allocations:
        hours = a.gpus * a.seconds_in(since, until, now) / HOUR
        if hours <= 0:
            continue
        line = lines.setdefault(a.key(by), Line(a.key(by)))
        line.gpu_hours += hours
        if a.model in prices:
            line.cost += hours * prices[a.model]
        else:
            line.unpriced_gpu_hours += hours
            unpriced.add(a.model)
    for span in idle:
        hours = span.gpus * span.seconds_in(since, until, now) / HOUR
        if hours > 0:
            lines.setdefault(span.key(by), Line(span.key(by))).idle_gpu_hours += hours
    ordered = tuple(lines[k] for k in sorted(lines))
    total = Line(())
    for line in ordered:
        total.gpu_hours += line.gpu_hours
        total.idle_gpu_hours += line.idle_gpu_hours
        total.cost += line.cost
        total.unpriced_gpu_hours += line.unpriced_gpu_hours
    return Report(by, ordered, total, tuple(sorted(unpriced)))


class BudgetState(enum.StrEnum):
    OK = "ok"
    SOFT = "over-soft"   # at or past the soft limit: warned
    HARD = "over-hard"   # at or past the hard limit: new jobs wait


@dataclass(frozen=True, slots=True)
class Budget:
    """A project's limits per calendar month, in GPU-hours (None: no such limit)."""

    soft: float | None = None
    hard: float | None = None

    def state(self, used_gpu_hours: float) -> BudgetState:
        if self.hard is not None and used_gpu_hours >= self.hard:
            return BudgetState.HARD
        if self.soft is not None and used_gpu_hours >= self.soft:
            return BudgetState.SOFT
        return BudgetState.OK


def check_budget(soft: float | None, hard: float | None) -> Budget:
    """A budget from an operator's figures; ``InvalidSpec`` names the figure that is wrong."""
    for name, value in (("soft", soft), ("hard", hard)):
        if value is not None and not (0 <= value < float("inf")):
            raise InvalidSpec(name, f"must be a number of GPU-hours, 0 or more, got {value!r}")
    if soft is not None and hard is not None and soft > hard:
        raise InvalidSpec("soft", f"the soft limit ({soft:g} GPU-hours) is above the hard "
                                 f"limit ({hard:g}); a warning after the stop warns nobody")
    return Budget(soft, hard)


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """A project's budget in the month that holds ``now``, and what it has used of it."""

    project: str
    budget: Budget
    month: str            # 2026-11
    month_start: float
    month_end: float
    used_gpu_hours: float
    state: BudgetState = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", self.budget.state(self.used_gpu_hours))
