"""Whether a new job's project is at or past its hard budget, for the submit's answer.

Such a job is accepted and waits (``rota.control.budgets``: reason ``budget``, until the month
ends or an operator raises the limit); the answer to its submit carries the project's budget
(``rota.api.accounting.budget_view``) so that ``rota run`` and ``rota submit`` say so at once,
not only ``rota show``. A project's answer is remembered for ``TTL_S``: submits come by the
hundred, budgets change by the month, and the control loop decides from the exact figures.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from rota.api.accounting import budget_view
from rota.core.accounting import BudgetState
from rota.store import Store

TTL_S = 5.0


class HardBudgets:
    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store, self.clock = store, clock
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, dict[str, Any] | None]] = {}

    def remembered(self, project: str) -> tuple[bool, dict[str, Any] | None]:
        """(known, the budget view where the project is past its hard limit) without I/O."""
        now = self.clock()
        with self._lock:
            hit = self._seen.get(project)
        if hit is None or now - hit[0] >= TTL_S:
            return False, None
        return True, hit[1]

    def over(self, project: str) -> dict[str, Any] | None:
        """The project's budget view if it is at or past its hard limit now, else None."""
        known, view = self.remembered(project)
        if known:
            return view
        now = self.clock()
        status = self.store.budget_status(now, [project]).get(project)
        view = budget_view(status) if status is not None and \
            status.state is BudgetState.HARD else None
        with self._lock:
            self._seen[project] = (now, view)
        return view
