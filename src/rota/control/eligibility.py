"""Which pending jobs may be scheduled now: a pure decision, before the cycle sees them.

A pending job that may not start now is left out of the cycle's snapshot (it holds nothing and
blocks nobody) and waits with the reason that comes first:

1. ``account``: its owner's OS account cannot run jobs here (``rota.control.accounts``);
2. ``held``: held back by a person (``rota hold``) or by the control plane (lost too often in a
   row), until released (``rota release``);
3. ``not-before``: its ``eligible_at`` is ahead: the time the job asked not to start before,
   or the backoff after a failed run; the wait's estimated start is that time.

``Facts`` come from the store (``Store.pending_holds``) and the accounts; nothing here reads a
clock or does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from rota.core import Job, Reason, ReasonCode
from rota.scheduler import Wait


@dataclass(frozen=True, slots=True)
class Facts:
    holds: Mapping[str, tuple[str, float | None]] = field(default_factory=dict)
    account_hold: Callable[[str], str | None] = lambda user: None


def waits(pending: Iterable[Job], facts: Facts, now: float) -> list[Wait]:
    """The waits of the pending jobs that may not be scheduled now."""
    out: list[Wait] = []
    by_user: dict[str, str | None] = {}
    for job in pending:
        if job.user not in by_user:
            by_user[job.user] = facts.account_hold(job.user)
        if by_user[job.user]:
            out.append(Wait(job.id, (Reason(ReasonCode.ACCOUNT, detail=by_user[job.user] or ""),)))
            continue
        held, eligible_at = facts.holds.get(job.id, ("", None))
        if held:
            out.append(Wait(job.id, (Reason(ReasonCode.HELD, detail=held),)))
        elif eligible_at is not None and eligible_at > now:
            out.append(Wait(job.id, (Reason(ReasonCode.NOT_BEFORE, detail=(
                f"not before {eligible_at:.0f}")),), estimated_start=eligible_at))
    return out
