"""A standby control plane: a second ``rota up`` on a database whose ``control-loop`` lease
(``rota.control.lease``) a live control plane of another site holds.

Vocabulary: the *leader* holds the lease and runs the control loop; a *standby* serves the API
from the same database and does nothing else but try to take the lease. Roles:

- ``Standby(keeper, promote)``: ``start`` runs a thread that tries ``keeper.acquire`` every
  ``retry_s`` (``RETRY_S``). While another site's holder has the lease live, the attempt is
  refused (``LeaseHeld``) and the standby remembers who leads and until when. The moment it
  gets the lease it calls ``promote()`` once (``rota up``: the control loop's normal start,
  which adopts every active job) and from then on leads; a ``promote`` that fails is logged and
  called again at the next try while the lease is still held.
- Safety is the lease's: a leader acts only before its last written expiry less a margin, and
  one that finds the lease taken over stops for good. So a standby takes over only once the
  leader's lease has expired, and the leader, dead or frozen, can no longer act by then.
- ``role()`` says which role this plane has now and who leads, for the API and the logs.

Failures to reach the store while trying are logged and tried again; they never end the
thread. ``stop`` ends the thread (a promotion under way finishes first).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from rota.control.lease import NAME, RETRY_S, LeaseKeeper
from rota.store.lease import LeaseHeld

log = logging.getLogger("rota.control")


@dataclass(frozen=True, slots=True)
class Role:
    role: str                # "leader" or "standby"
    holder: str              # this plane's lease holder name
    leader: str | None       # who holds the lease, as last seen (None: nobody)
    leader_until: float | None  # when the leader's lease expires, as last seen
    leading_since: float | None = None  # this plane's: when it took the lease

    def to_dict(self, now: float) -> dict[str, object]:
        left = None if self.leader_until is None else max(0.0, self.leader_until - now)
        return {"role": self.role, "holder": self.holder, "leader": self.leader,
                "lease_left_s": None if left is None else round(left, 3),
                "leading_since": self.leading_since}


def leading(keeper: LeaseKeeper) -> Role:
    """The role of a plane that took the lease with ``keeper``."""
    held = keeper.held
    return Role("leader", keeper.holder, keeper.holder,
                None if held is None else held.expires_at,
                None if held is None else held.acquired_at)


class Standby:
    def __init__(self, keeper: LeaseKeeper, held: LeaseHeld, promote: Callable[[], None],
                 clock: Callable[[], float] = time.time, retry_s: float = RETRY_S) -> None:
        """``held``: the refusal that made this plane a standby (who leads, until when)."""
        if not 0 < retry_s < keeper.ttl_s:
            raise ValueError(f"retry_s must be positive and below the lease's time to live, "
                             f"got {retry_s}")
        self.keeper, self.promote, self.clock, self.retry_s = keeper, promote, clock, retry_s
        self.leader: str | None = held.holder
        self.leader_until: float | None = held.expires_at
        self.promoted = threading.Event()
        self._halt = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        log.info("standby: %s holds the %s lease; this control plane serves the API and "
                 "takes over when that lease expires", self.leader, NAME)
        self._thread = threading.Thread(target=self._run, name="rota-standby", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._halt.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
            self._thread = None

    def role(self) -> Role:
        """Never waits for a promotion under way (it answers "standby" until it ended)."""
        if self.promoted.is_set():
            return leading(self.keeper)
        return Role("standby", self.keeper.holder, self.leader, self.leader_until)

    def _run(self) -> None:
        while not self._halt.is_set():
            if self.try_once():
                return
            self._halt.wait(self.retry_s)

    def try_once(self) -> bool:
        """One try: take the lease and promote this plane. True once it leads."""
        with self._lock:
            if self.promoted.is_set():
                return True
            if self._halt.is_set():
                return False
            if self.keeper.held is None:
                try:
                    self.keeper.acquire(self.clock())
                except LeaseHeld as exc:
                    self.leader, self.leader_until = exc.holder, exc.expires_at
                    return False
                except Exception:  # the store unreachable, a concurrent take: try again
                    log.exception("standby: taking the %s lease failed; trying again", NAME)
                    return False
                log.warning("standby: took the %s lease (%s's had expired): this control plane "
                            "leads now", NAME, self.leader)
            try:
                self.promote()
            except Exception:
                log.exception("standby: starting the control loop failed; trying again")
                return False
            self.leader, self.leader_until = self.keeper.holder, None
            self.promoted.set()
            return True
