"""Which pending jobs may be scheduled now: a pure decision, before the cycle sees them.

A pending job that may not start now is left out of the cycle's snapshot (it holds nothing and
blocks nobody) and waits with the first reason that applies:

1. ``account``: its owner's OS account cannot run jobs here (``rota.control.accounts``);
2. ``budget``: its project has used its hard budget of GPU-hours for this calendar month
   (UTC; ``rota.control.budgets``); the wait's estimated start is the next month's start;
3. ``held``: held back by a person (``rota hold``) or by the control plane (lost too often in a
   row), until released (``rota release``);
4. ``not-before``: its ``eligible_at`` is ahead: the ``start_at`` it asked for, or the backoff
   after a failed run; the wait's estimated start is that time;
5. ``dependency``: a job it depends on has not ended as it needs: ``after_ok`` waits for a
   success, ``after_any`` for any end, ``after_failed`` for a failure or a cancel. A dependency
   that can no longer be met (``after_ok`` on a job that failed, ``after_failed`` on one that
   succeeded) *rejects* the job, as Slurm's ``kill_invalid_depend`` does;
6. ``array-limit``: its array already has ``limit`` tasks holding resources; of the tasks that
   may start, only as many as the limit leaves room for go to the cycle, lowest index first.

Facts come from the store (``Store.eligibility_facts``) and the accounts; nothing here reads a
clock or does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from rota.core import Job, JobState, Reason, ReasonCode
from rota.core.accounting import BudgetStatus
from rota.scheduler import Reject, Wait
from rota.store.records import EligibilityFacts, PendingFacts

NEEDS = {  # dependency kind -> the end states that meet it
    "after_ok": frozenset({JobState.SUCCEEDED}),
    "after_any": frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}),
    "after_failed": frozenset({JobState.FAILED, JobState.CANCELLED}),
}


@dataclass(frozen=True, slots=True)
class Facts:
    store: EligibilityFacts = field(default_factory=EligibilityFacts)
    account_hold: Callable[[str], str | None] = lambda user: None
    over_budget: Mapping[str, BudgetStatus] = field(default_factory=dict)  # project -> status


@dataclass(slots=True)
class Outcome:
    waits: list[Wait] = field(default_factory=list)
    rejects: list[Reject] = field(default_factory=list)

    @property
    def kept(self) -> set[str]:
        return {w.job for w in self.waits} | {r.job for r in self.rejects}


def decide(pending: Iterable[Job], facts: Facts, now: float) -> Outcome:
    """The pending jobs that may not be scheduled now: their waits, and the rejects of those
    whose dependencies can no longer be met."""
    out = Outcome()
    accounts: dict[str, str | None] = {}
    candidates: dict[str, list[tuple[int, str]]] = {}  # array id -> (index, job) that may start
    for job in pending:
        if job.user not in accounts:
            accounts[job.user] = facts.account_hold(job.user)
        if accounts[job.user]:
            out.waits.append(Wait(job.id, (Reason(ReasonCode.ACCOUNT,
                                                  detail=accounts[job.user] or ""),)))
            continue
        if job.project in facts.over_budget:
            out.waits.append(budget_wait(job.id, facts.over_budget[job.project]))
            continue
        mine = facts.store.pending.get(job.id, PendingFacts())
        verdict = _check(job.id, mine, facts.store, now)
        if isinstance(verdict, Reject):
            out.rejects.append(verdict)
        elif verdict is not None:
            out.waits.append(verdict)
        elif mine.array is not None and mine.array[2] is not None:
            candidates.setdefault(mine.array[0], []).append((mine.array[1], job.id))
    for array, tasks in candidates.items():
        limit = facts.store.pending[tasks[0][1]].array[2]  # type: ignore[index]
        room = max(0, limit - facts.store.array_active.get(array, 0))
        for _, job_id in sorted(tasks)[room:]:
            out.waits.append(Wait(job_id, (Reason(
                ReasonCode.ARRAY_LIMIT, "tasks", None, None, limit,
                f"array {array} runs at most {limit} tasks at once"),)))
    return out


def budget_wait(job_id: str, status: BudgetStatus) -> Wait:
    """The wait of a job whose project reached its hard limit; the detail stays the same all
    month (a wait that does not change is not written again)."""
    return Wait(job_id, (Reason(
        ReasonCode.BUDGET, "gpu_hours", None, None, status.budget.hard,
        f"project {status.project} reached its hard limit of {status.budget.hard:g} "
        f"GPU-hours for {status.month}"),), estimated_start=status.month_end)


def _check(job_id: str, mine: PendingFacts, store: EligibilityFacts,
           now: float) -> Wait | Reject | None:
    if mine.held:
        return Wait(job_id, (Reason(ReasonCode.HELD, detail=mine.held),))
    if mine.eligible_at is not None and mine.eligible_at > now:
        return Wait(job_id, (Reason(ReasonCode.NOT_BEFORE, detail=(
            f"not before {mine.eligible_at:.0f}")),), estimated_start=mine.eligible_at)
    for kind, dep in mine.depends:
        state = store.states.get(dep)
        if state is not None and state in NEEDS[kind]:
            continue
        if state is None or state.terminal:  # gone, or ended otherwise: it can never be met
            how = "is gone" if state is None else f"ended {state}"
            return Reject(job_id, (Reason(ReasonCode.DEPENDENCY, detail=(
                f"job {dep} {how}, so {kind} can never be met")),))
        return Wait(job_id, (Reason(ReasonCode.DEPENDENCY, detail=(
            f"waits for job {dep} to end ({kind}); it is {state}")),))
    return None
