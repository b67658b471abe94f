"""Named leases in the ``leases`` table: which process may act on what a database describes.

Vocabulary: a *lease* is a row (``name``, ``holder``, ``acquired_at``, ``expires_at``). Its
*holder* is an opaque string naming one process (``rota.control.lease`` uses
``<site>:<pid>:<random>``). A lease is *live* while ``now < expires_at``.

Rules (each function runs in the caller's write transaction):

- ``take``: a missing lease is created; a lease held by the caller, expired, or whose holder
  ``may_replace`` accepts, is taken over with a guarded ``UPDATE ... WHERE holder = <read>
  AND expires_at = <read>``; a live lease of another holder raises ``LeaseHeld`` naming it.
- ``renew``: extends the caller's lease, ``UPDATE ... WHERE holder = me``; returns None when
  the caller no longer holds it (someone took it over after it expired). A lease that expired
  but that nobody took is still the caller's: nobody else acted meanwhile.
- ``release``: deletes the lease if the caller holds it, so that the next holder need not
  wait for it to expire.

Times are the callers' (``now``); holders on several machines must have clocks that agree to
well within the time to live.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from rota.core import InvalidSpec, RotaError
from rota.store.errors import Conflict
from rota.store.schema import leases


@dataclass(frozen=True, slots=True)
class Lease:
    name: str
    holder: str
    acquired_at: float
    expires_at: float


class LeaseHeld(RotaError):
    """Another live holder has the lease."""

    code = "lease_held"

    def __init__(self, name: str, holder: str, expires_at: float) -> None:
        super().__init__(f"lease {name!r} is held by {holder} until {expires_at:.3f}")
        self.name, self.holder, self.expires_at = name, holder, expires_at


def _check(holder: str, ttl_s: float) -> None:
    if not holder or len(holder) > 255:
        raise InvalidSpec("lease.holder", f"must be 1-255 characters, got {len(holder)}")
    if not ttl_s > 0:
        raise InvalidSpec("lease.ttl_s", f"must be positive, got {ttl_s!r}")


def take(conn: Connection, name: str, holder: str, ttl_s: float, now: float,
         may_replace: Callable[[str], bool] = lambda _holder: False) -> Lease:
    _check(holder, ttl_s)
    row = conn.execute(select(leases).where(leases.c.name == name).with_for_update()).first()
    lease = Lease(name, holder, now, now + ttl_s)
    if row is None:
        try:
            conn.execute(insert(leases).values(name=name, holder=holder, acquired_at=now,
                                               expires_at=lease.expires_at))
        except IntegrityError:  # another process created it first: read it again
            raise Conflict(f"lease {name!r} was created concurrently; retry") from None
        return lease
    if row.holder != holder and row.expires_at > now and not may_replace(row.holder):
        raise LeaseHeld(name, row.holder, row.expires_at)
    acquired = row.acquired_at if row.holder == holder else now
    result = conn.execute(
        update(leases).where(leases.c.name == name, leases.c.holder == row.holder,
                             leases.c.expires_at == row.expires_at)
        .values(holder=holder, acquired_at=acquired, expires_at=lease.expires_at))
    if result.rowcount != 1:
        raise Conflict(f"lease {name!r} changed while it was being taken; retry")
    return Lease(name, holder, acquired, lease.expires_at)


def renew(conn: Connection, name: str, holder: str, ttl_s: float, now: float) -> Lease | None:
    _check(holder, ttl_s)
    result = conn.execute(update(leases).where(leases.c.name == name, leases.c.holder == holder)
                          .values(expires_at=now + ttl_s))
    if result.rowcount != 1:
        return None
    row = conn.execute(select(leases).where(leases.c.name == name)).one()
    return Lease(name, row.holder, row.acquired_at, row.expires_at)


def release(conn: Connection, name: str, holder: str) -> bool:
    result = conn.execute(delete(leases).where(leases.c.name == name, leases.c.holder == holder))
    return result.rowcount == 1


def current(conn: Connection, name: str) -> Lease | None:
    row = conn.execute(select(leases).where(leases.c.name == name)).first()
    return None if row is None else Lease(row.name, row.holder, row.acquired_at, row.expires_at)
