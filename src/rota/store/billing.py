"""``Billing``: the ``Store``'s usage (decayed, for fair share), exact accounting, prices and
budgets.

Each method is one transaction (``rota.store.transactions``) around the SQL in
``rota.store.cycle`` (decayed usage) and ``rota.store.accounting``; the arithmetic on what they
read is ``rota.core.accounting``'s.
"""

from __future__ import annotations

from typing import Iterable

from rota.core import Usage
from rota.core.accounting import BudgetStatus, Report, check_budget, tally
from rota.store import accounting, cycle, marks
from rota.store.transactions import Transactions


class Billing(Transactions):
    """What projects used, what it cost, and what they may still use this month."""

    def bill(self, gpu_seconds: dict[str, float], billed_until: dict[str, float],
             now: float) -> None:
        """Add GPU-seconds per project and record up to when each job is billed, in one
        transaction: a restarted control plane bills from there, never twice."""
        with self._write() as conn:
            for project, seconds in sorted(gpu_seconds.items()):
                cycle.add_usage(conn, project, seconds, now, self.usage_half_life_s)
            marks.note_billed(conn, billed_until)

    def add_usage(self, project: str, gpu_seconds: float, now: float) -> Usage:
        with self._write() as conn:
            return cycle.add_usage(conn, project, gpu_seconds, now, self.usage_half_life_s)

    def usage(self, now: float) -> dict[str, float]:
        """Each project's GPU-seconds decayed to ``now`` with the store's half-life."""
        with self._read() as conn:
            stored = cycle.stored_usage(conn)
        return {p: cycle.decayed(u.gpu_seconds, u.as_of, now, self.usage_half_life_s)
                for p, u in stored.items()}

    # exact accounting and budgets (``rota.store.accounting``, ``rota.core.accounting``)
    def report(self, since: float, until: float, by: Iterable[str], now: float,
               projects: Iterable[str] | None = None) -> tuple[Report, str | None]:
        """GPU-hours, idle GPU-hours and cost of ``[since, until)`` grouped by ``by``, of
        ``projects`` (None: every project), attempts still running counted up to ``now``; and
        the currency of the costs (None: no prices are set)."""
        names = None if projects is None else sorted(set(projects))
        with self._read() as conn:
            held = accounting.allocations(conn, since, until, names)
            idle = accounting.idle(conn, since, until, names)
            currency, per_model = accounting.read_prices(conn)
        return tally(held, idle, tuple(by), since, until, now, per_model), currency

    def put_prices(self, currency: str | None, per_model: dict[str, float]) -> None:
        """Replace the prices of a GPU-hour per model (no currency: no prices)."""
        with self._write() as conn:
            accounting.put_prices(conn, currency, per_model)

    def prices(self) -> tuple[str | None, dict[str, float]]:
        with self._read() as conn:
            return accounting.read_prices(conn)

    def note_idle(self, spans: dict[tuple[str, int, float], float]) -> None:
        """Record idle spans, (job, attempt, since) -> until (``rota.control.idle``)."""
        if spans:
            with self._write() as conn:
                accounting.note_idle(conn, spans)

    def set_budget(self, project: str, soft: float | None, hard: float | None) -> None:
        """A project's monthly limits in GPU-hours (both None: no budget)."""
        budget = check_budget(soft, hard)
        with self._write() as conn:
            accounting.set_budget(conn, project, budget, self.clock())

    def budget_status(self, now: float, projects: Iterable[str] | None = None
                      ) -> dict[str, BudgetStatus]:
        """Each project with a budget (of ``projects``; None: all): its limits and what it
        used in the calendar month (UTC) of ``now``, up to ``now``."""
        start, end, month = accounting.month_bounds(now)
        with self._read() as conn:
            found = accounting.read_budgets(conn)
            if projects is not None:
                found = {p: b for p, b in found.items() if p in set(projects)}
            used = accounting.used_gpu_hours(conn, now, found) if found else {}
        return {p: BudgetStatus(p, budget, month, start, end, used[p])
                for p, (budget, _) in found.items()}

    def budgets_warned(self) -> dict[str, str]:
        """project -> the month (``2026-11``) whose soft limit it was last warned of."""
        with self._read() as conn:
            return {p: warned for p, (_, warned) in accounting.read_budgets(conn).items()}

    def mark_budget_warned(self, projects: Iterable[str], month: str) -> None:
        with self._write() as conn:
            accounting.mark_warned(conn, projects, month)
