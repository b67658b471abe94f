"""Exact accounting from the store's records: allocations, idle spans, prices and budgets.

What counts (``rota.core.accounting`` does the arithmetic):

- Each row of ``attempts`` is one attempt of a job holding its devices from ``bound_at`` (the
  cycle bound it; the GPUs were taken from then on) to ``ended_at`` (it left them), or up to
  now while it holds them. Its ``gpus`` column says how many milli-GPUs of each GPU model it
  holds, as the inventory said when it was bound (and again when its backend placed it
  elsewhere: ``record_placement``); rows written before that column existed are read from their
  placement and today's inventory (``unknown`` for a device no node reports any more).
- ``gpu_months``: when an attempt ends, the GPU-seconds it held are added to its project's
  row of each calendar month its span falls in (``add_ended``); a budget's figure for a month
  is that row plus the attempts still holding their GPUs (``used_gpu_hours``), so that the
  control loop, which asks every pass, never reads the month's attempts again.
- ``idle_spans``: the times an attempt's GPUs were measured idle, read the same way.
- Unlike the ``usage`` table (fair share's figure, decayed with a half-life), nothing here is
  decayed or sampled: a range's GPU-hours are the sum of what each attempt held in it.

Months are calendar months in UTC (``month_bounds``).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

from sqlalchemy import Connection, and_, delete, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from rota.core import MILLI
from rota.core.accounting import Allocation, Budget
from rota.store.errors import NotFound
from rota.store.schema import (
    attempts, budgets, gpu_months, idle_spans, jobs, nodes, prices, projects,
)

UNKNOWN_MODEL = "unknown"


def month_bounds(t: float) -> tuple[float, float, str]:
    """The calendar month (UTC) that holds ``t``: its start, the next month's start, and its
    name (``2026-11``)."""
    day = datetime.fromtimestamp(t, timezone.utc)
    start = datetime(day.year, day.month, 1, tzinfo=timezone.utc)
    after = datetime(day.year + day.month // 12, day.month % 12 + 1, 1, tzinfo=timezone.utc)
    return start.timestamp(), after.timestamp(), f"{day.year:04d}-{day.month:02d}"


def months_of(since: float, until: float) -> list[tuple[str, float, float]]:
    """The calendar months (UTC) that ``[since, until)`` falls in: each one's name and the part
    of the span in it."""
    out, t = [], since
    while t < until:
        _, end, name = month_bounds(t)
        out.append((name, t, min(end, until)))
        t = end
    return out


# -- what an attempt holds ---------------------------------------------------------------------

def device_models(conn: Connection, node_names: Iterable[str]) -> dict[tuple[str, int], str]:
    """(node, device index) -> GPU model, from the inventory, for ``node_names``."""
    names = sorted(set(node_names))
    if not names:
        return {}
    return {(r.name, d["index"]): d["model"]
            for r in conn.execute(select(nodes.c.name, nodes.c.devices)
                                  .where(nodes.c.name.in_(names)))
            for d in r.devices}


def gpus_by_model(conn: Connection, placement: list[dict[str, Any]] | None,
                  models: Mapping[tuple[str, int], str] | None = None) -> dict[str, int]:
    """Milli-GPUs per GPU model of a stored placement; ``models`` as ``device_models`` gives
    them (None: read here)."""
    if not placement:
        return {}
    if models is None:
        models = device_models(conn, (r["node"] for r in placement))
    out: dict[str, int] = {}
    for replica in placement:
        for index, milli, _memory in replica["devices"]:
            model = models.get((replica["node"], index), UNKNOWN_MODEL)
            out[model] = out.get(model, 0) + milli
    return out


_HELD = [attempts.c.job, attempts.c.attempt, attempts.c.bound_at, attempts.c.ended_at,
         attempts.c.placement, attempts.c.gpus, jobs.c.project, jobs.c.user, jobs.c.queue]


def _overlapping(since: float, until: float, project_names: Iterable[str] | None) -> Any:
    """Attempts that held devices at some time of ``[since, until)``, with their job's names."""
    query = (select(*_HELD).join(jobs, jobs.c.id == attempts.c.job)
             .where(attempts.c.bound_at < until,
                    or_(attempts.c.ended_at.is_(None), attempts.c.ended_at > since)))
    if project_names is not None:
        query = query.where(jobs.c.project.in_(sorted(project_names)))
    return query


def _allocations(conn: Connection, row: Any, start: float, end: float | None
                 ) -> list[Allocation]:
    held = row.gpus if row.gpus is not None else gpus_by_model(conn, row.placement)
    return [Allocation(row.project, row.user, row.queue, model, milli / MILLI, start, end)
            for model, milli in sorted(held.items()) if milli > 0]


def held_milli(gpus: Mapping[str, int] | None, placement: list[dict[str, Any]] | None) -> int:
    """The milli-GPUs an attempt holds, all models together: its ``gpus``, else (a row stored
    before that column) its placement's devices."""
    if gpus is not None:
        return sum(int(m) for m in gpus.values())
    return sum(int(d[1]) for r in placement or () for d in r["devices"])


def add_ended(conn: Connection, job: int, attempt: int, project: str, ended_at: float) -> None:
    """Add what attempt ``attempt`` of job ``job`` (of ``project``), ending at ``ended_at``,
    held to ``gpu_months``."""
    row = conn.execute(select(attempts.c.bound_at, attempts.c.gpus, attempts.c.placement)
                       .where(attempts.c.job == job, attempts.c.attempt == attempt)).first()
    if row is None:
        return
    gpus = held_milli(row.gpus, row.placement) / MILLI
    if gpus <= 0:
        return
    upsert = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}[conn.dialect.name]
    for month, start, end in months_of(row.bound_at, ended_at):
        adding = upsert(gpu_months).values(project=project, month=month,
                                           gpu_seconds=gpus * (end - start))
        conn.execute(adding.on_conflict_do_update(  # one statement: two writers never collide
            index_elements=[gpu_months.c.project, gpu_months.c.month],
            set_={"gpu_seconds": gpu_months.c.gpu_seconds + adding.excluded.gpu_seconds}))


def used_gpu_hours(conn: Connection, now: float, project_names: Iterable[str]
                   ) -> dict[str, float]:
    """GPU-hours each of ``project_names`` used in the calendar month (UTC) of ``now`` up to
    ``now``: its ``gpu_months`` row (the attempts that ended) and the attempts that hold
    GPUs now, counted up to ``now``."""
    names = sorted(set(project_names))
    start, end, month = month_bounds(now)
    used = dict.fromkeys(names, 0.0)
    if not names:
        return used
    for project, seconds in conn.execute(
            select(gpu_months.c.project, gpu_months.c.gpu_seconds)
            .where(gpu_months.c.month == month, gpu_months.c.project.in_(names))):
        used[project] += seconds / 3600.0
    running = (select(jobs.c.project, attempts.c.bound_at, attempts.c.gpus, attempts.c.placement)
               .join(jobs, jobs.c.id == attempts.c.job)
               .where(attempts.c.ended_at.is_(None), attempts.c.bound_at < end,
                      jobs.c.project.in_(names)))
    for row in conn.execute(running):
        seconds = max(0.0, min(now, end) - max(row.bound_at, start))
        used[row.project] += held_milli(row.gpus, row.placement) / MILLI * seconds / 3600.0
    return used


def allocations(conn: Connection, since: float, until: float,
                project_names: Iterable[str] | None = None) -> list[Allocation]:
    """Every allocation that overlaps ``[since, until)``, of ``project_names`` (None: all)."""
    out: list[Allocation] = []
    for row in conn.execute(_overlapping(since, until, project_names).order_by(
            attempts.c.job, attempts.c.attempt)):
        out.extend(_allocations(conn, row, row.bound_at, row.ended_at))
    return out


def idle(conn: Connection, since: float, until: float,
         project_names: Iterable[str] | None = None) -> list[Allocation]:
    """The idle spans that overlap ``[since, until)``, each as the allocation it was idle of."""
    query = (select(*_HELD, idle_spans.c.since.label("idle_since"),
                    idle_spans.c.until.label("idle_until"))
             .join(jobs, jobs.c.id == attempts.c.job)
             .join(idle_spans, and_(idle_spans.c.job == attempts.c.job,
                                    idle_spans.c.attempt == attempts.c.attempt))
             .where(idle_spans.c.since < until, idle_spans.c.until > since)
             .order_by(attempts.c.job, attempts.c.attempt, idle_spans.c.since))
    if project_names is not None:
        query = query.where(jobs.c.project.in_(sorted(project_names)))
    out: list[Allocation] = []
    for row in conn.execute(query):
        out.extend(_allocations(conn, row, row.idle_since, row.idle_until))
    return out


def note_idle(conn: Connection, spans: Mapping[tuple[str, int, float], float]) -> None:
    """Record idle spans: (job, attempt, since) -> until, extended as they go on. A job gone
    meanwhile is skipped."""
    for (job, attempt, since), until in sorted(spans.items()):
        key = int(job)
        this = and_(idle_spans.c.job == key, idle_spans.c.attempt == attempt,
                    idle_spans.c.since == since)
        if conn.execute(update(idle_spans).where(this, idle_spans.c.until < until)
                        .values(until=until)).rowcount:
            continue
        if conn.execute(select(idle_spans.c.job).where(this)).first() is not None:
            continue
        if conn.execute(select(jobs.c.id).where(jobs.c.id == key)).first() is None:
            continue
        conn.execute(insert(idle_spans).values(job=key, attempt=attempt, since=since,
                                               until=until))


# -- prices -------------------------------------------------------------------------------------

def put_prices(conn: Connection, currency: str | None, per_model: Mapping[str, float]) -> None:
    """Replace every price; no currency: no prices."""
    conn.execute(delete(prices))
    if currency is not None and per_model:
        conn.execute(insert(prices), [{"model": m, "currency": currency, "gpu_hour": p}
                                      for m, p in sorted(per_model.items())])


def read_prices(conn: Connection) -> tuple[str | None, dict[str, float]]:
    """(currency, model -> price of one GPU-hour); (None, {}) without prices."""
    rows = conn.execute(select(prices).order_by(prices.c.model)).all()
    if not rows:
        return None, {}
    return rows[0].currency, {r.model: r.gpu_hour for r in rows}


# -- budgets ------------------------------------------------------------------------------------

def set_budget(conn: Connection, project: str, budget: Budget, now: float) -> None:
    """Set (or with no limit at all, remove) a project's budget; a new soft limit warns again."""
    if conn.execute(select(projects.c.name).where(projects.c.name == project)).first() is None:
        raise NotFound("project", project)
    conn.execute(delete(budgets).where(budgets.c.project == project))
    if budget.soft is not None or budget.hard is not None:
        conn.execute(insert(budgets).values(project=project, soft_gpu_hours=budget.soft,
                                            hard_gpu_hours=budget.hard, warned="", set_at=now))


def read_budgets(conn: Connection) -> dict[str, tuple[Budget, str]]:
    """project -> (its budget, the month it was last warned of)."""
    return {r.project: (Budget(r.soft_gpu_hours, r.hard_gpu_hours), r.warned)
            for r in conn.execute(select(budgets).order_by(budgets.c.project))}


def mark_warned(conn: Connection, project_names: Iterable[str], month: str) -> None:
    for name in sorted(project_names):
        conn.execute(update(budgets).where(budgets.c.project == name).values(warned=month))

