"""Project budgets, carried out: which projects' new jobs wait, and the soft limit's warning.

Each pass, ``BudgetWatch.review`` reads every project's budget and what it used in the
calendar month (UTC) so far (``Store.budget_status``, exact: the month's total of the attempts
that ended, kept as each ends, and the attempts still running counted up to now) and:

- returns the projects at or past their hard limit: their pending jobs wait with reason
  ``budget`` (``rota.control.eligibility``), until the month ends or an operator raises or
  removes the limit; jobs that hold GPUs go on, and go on counting;
- warns, once per project and month, when a project reaches its soft limit: an event
  ``budget-warning`` in the history of each of its jobs that is pending or holds resources
  then. The month warned of is stored, so a restarted control plane does not warn again;
  setting the budget anew warns again.

Without any budget this costs one small read per pass.
"""

from __future__ import annotations

import logging

from rota.core import JobState
from rota.core.accounting import BudgetState, BudgetStatus
from rota.store import JobFilter, Store

log = logging.getLogger("rota.control")
LIVE = frozenset(s for s in JobState if s is JobState.PENDING or s.holds_resources)
PAGE = 1000


class BudgetWatch:
    def __init__(self, store: Store) -> None:
        self.store = store

    def review(self, now: float) -> dict[str, BudgetStatus]:
        """The projects whose new jobs wait now: project -> its budget status."""
        statuses = self.store.budget_status(now)
        if not statuses:
            return {}
        reached = [s for s in statuses.values()
                   if s.budget.soft is not None and s.used_gpu_hours >= s.budget.soft]
        if reached:
            warned = self.store.budgets_warned()
            for status in reached:
                if warned.get(status.project) != status.month:
                    self._warn(status)
        return {p: s for p, s in statuses.items() if s.state is BudgetState.HARD}

    def _warn(self, status: BudgetStatus) -> None:
        hard = (f"; beyond its hard limit of {status.budget.hard:g} its new jobs wait"
                if status.budget.hard is not None else "")
        message = (f"project {status.project} used {status.used_gpu_hours:.2f} GPU-hours in "
                   f"{status.month}, past its soft limit of {status.budget.soft:g}{hard}")
        self.store.note_many(self._live(status.project), "budget-warning", message)
        self.store.mark_budget_warned([status.project], status.month)
        log.info("budget: %s", message)

    def _live(self, project: str) -> list[str]:
        where, found, after = JobFilter(projects=frozenset({project}), states=LIVE), [], None
        while True:
            page = self.store.list_jobs(where, limit=PAGE, after=after)
            found.extend(r.id for r in page.items)
            if page.next_after is None:
                return found
            after = page.next_after
