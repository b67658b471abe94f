"""A short-lived cache of authenticated principals, so a request costs no read transaction.

Keyed by the token's SHA-256 (the plaintext is never kept), each entry holds the ``Principal``
the store returned and the monotonic time it expires, ``ttl_s`` after it was read. Only
successes are cached: an unknown or revoked token is looked up every time.

Invalidation: the ``Store`` clears the whole cache whenever it writes anything a principal is
made of (a token revoked, a user created, a membership added or removed), so within
one process a revoked token is refused by the very next request. A change written by another
process sharing the database (a second control plane on the same PostgreSQL) is seen within
``ttl_s`` at the latest. ``ttl_s = 0`` turns the cache off.

The size is bounded: when ``max_entries`` is reached the cache starts afresh.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from rota.store.tokens import Principal, token_hash

DEFAULT_TTL_S = 5.0
DEFAULT_MAX_ENTRIES = 10_000


class AuthCache:
    def __init__(self, ttl_s: float = DEFAULT_TTL_S, max_entries: int = DEFAULT_MAX_ENTRIES,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if ttl_s < 0:
            raise ValueError(f"ttl_s must not be negative, got {ttl_s}")
        self.ttl_s = ttl_s
        self._max = max_entries
        self._now = monotonic
        self._entries: dict[str, tuple[Principal, float]] = {}
        self._generation = 0
        self._lock = threading.Lock()

    def get(self, token: str, load: Callable[[], Principal]) -> Principal:
        """The cached principal of ``token``, else ``load()`` (which may raise) remembered."""
        if self.ttl_s == 0:
            return load()
        key = token_hash(token)
        with self._lock:
            hit = self._entries.get(key)
            generation = self._generation
        if hit is not None and hit[1] > self._now():
            return hit[0]
        principal = load()
        with self._lock:
            # an invalidation while loading may have made what was read stale: do not keep it
            if generation == self._generation:
                if len(self._entries) >= self._max:
                    self._entries.clear()
                self._entries[key] = (principal, self._now() + self.ttl_s)
        return principal

    def peek(self, token: str) -> Principal | None:
        """The cached principal of ``token``, or None when not cached (or expired)."""
        if self.ttl_s == 0:
            return None
        with self._lock:
            hit = self._entries.get(token_hash(token))
        return hit[0] if hit is not None and hit[1] > self._now() else None

    def invalidate(self) -> None:
        with self._lock:
            self._entries.clear()
            self._generation += 1
