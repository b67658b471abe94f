"""One control loop per database: the ``control-loop`` lease (``rota.store.lease``).

The data-directory lock (``rota.control.lock``) keeps two control planes off one data
directory; the lease keeps two off one database, which a PostgreSQL URL lets several machines
share. Rules:

- The holder is ``<site>:<pid>:<random>``; the *site* is this host and data directory.
- ``acquire`` at start: refused with ``LeaseHeld`` (who holds it, until when) while another
  site's holder has it live. A holder of the *same* site is replaced at once: this process
  holds the site's data-directory lock, which proves that the earlier process is dead (the
  kernel released its lock), so a ``kill -9`` and an immediate restart wait for nothing. A
  dead plane of another site is replaced once its lease expires (``TTL_S``): a standby
  (``rota.control.standby``) tries every ``RETRY_S``, so it leads within ``TTL_S + RETRY_S``
  of the leader's death.
- ``ensure(now)`` before every pass: renews when a third of the time to live has passed since
  the last renewal, and says whether this process may still act. It may act while ``now`` is
  before the expiry it last wrote, less a safety margin; a renewal that finds the lease taken
  over means another control plane may act now, so this one must not, ever again.
- ``release`` at a clean stop, so that the next start need not wait.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import socket
from pathlib import Path

from rota.store import Store
from rota.store.lease import Lease

log = logging.getLogger("rota.control")
NAME = "control-loop"
TTL_S = 6.0
MARGIN_S = 1.5  # stop acting this long before the lease could be taken over
RETRY_S = 1.0   # how often a standby tries to take the lease


def site_of(data_dir: str | Path) -> str:
    digest = hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:12]
    return f"{socket.gethostname()[:180]}/{digest}"


class LeaseKeeper:
    def __init__(self, store: Store, data_dir: str | Path, ttl_s: float = TTL_S,
                 margin_s: float = MARGIN_S) -> None:
        if not 0 <= margin_s < ttl_s / 3:
            raise ValueError(f"margin_s must be below a third of ttl_s, got {margin_s}")
        self.store, self.ttl_s, self.margin_s = store, ttl_s, margin_s
        self.site = site_of(data_dir)
        self.holder = f"{self.site}:{os.getpid()}:{secrets.token_hex(4)}"
        self.held: Lease | None = None
        self.lost = False
        self._renewed_at = 0.0

    def acquire(self, now: float) -> Lease:
        """Take the lease; ``LeaseHeld`` when a live holder of another site has it."""
        same_site = self.site + ":"
        self.held = self.store.take_lease(NAME, self.holder, self.ttl_s, now,
                                          may_replace=lambda other: other.startswith(same_site))
        self._renewed_at, self.lost = now, False
        return self.held

    def ensure(self, now: float) -> bool:
        """True while this process may act; renews the lease when due."""
        if self.lost or self.held is None:
            return False
        if now - self._renewed_at >= self.ttl_s / 3:
            renewed = self.store.renew_lease(NAME, self.holder, self.ttl_s, now)
            if renewed is None:
                self.lost, self.held = True, None  # before anything says so
                other = self.store.get_lease(NAME)
                log.critical("lost the %s lease: %s holds it now; this control plane stops "
                             "acting", NAME, other.holder if other else "nobody")
                return False
            self.held, self._renewed_at = renewed, now
        return now < self.held.expires_at - self.margin_s

    def release(self) -> None:
        if self.held is not None and not self.lost:
            self.store.release_lease(NAME, self.holder)
        self.held = None


def held_message(name: str, holder: str, expires_at: float, now: float) -> str:
    """What ``rota up`` says when another control plane holds the lease."""
    site = holder.rsplit(":", 2)[0]
    host = site.split("/", 1)[0]
    pid = holder.rsplit(":", 2)[1] if holder.count(":") >= 2 else "?"
    left = max(0.0, expires_at - now)
    return (f"another control plane is using this database: {name} lease held by pid {pid} "
            f"on {host} (holder {holder}) for {left:.0f} s more unless it renews it. Stop "
            f"that control plane first (rota down on {host}); if it died, start again once "
            f"its lease has expired (at most {TTL_S:.0f} s after it died)")
