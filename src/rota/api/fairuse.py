"""Fair use of the control plane by its members: submissions per second, and idempotent submits.

- *Rate*: each user, and each project, has a token bucket of ``Cap.burst`` submissions that
  refills at ``Cap.submits_per_s`` (``rota.store.records.FairUse``, set by operators in the
  queues file). A submit takes one token from its user's bucket and one from its project's,
  or none: with either empty it is refused with ``TooMany("rate_limited")`` (HTTP 429) and
  ``Retry-After``, the seconds until both have a token again. Buckets live in this process
  (one API per database); operators' own submits are not limited. Caps on pending jobs are
  the store's (``rota.store.submit``), counted in the insert's transaction.
- *Idempotency*: ``fingerprint`` is what makes two requests "the same" for an
  ``Idempotency-Key``: the SHA-256 of the body as canonical JSON (keys sorted), so a client's
  retry of the same body matches whatever order it wrote the keys in.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from typing import Any, Callable

from rota.store.errors import TooMany
from rota.store.records import Cap, FairUse


class SubmitRate:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._now = monotonic
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}  # -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, user: str, project: str, caps: FairUse) -> None:
        """Take a token for one submit of ``user`` to ``project``; ``TooMany`` when either
        bucket is empty (and then none is taken)."""
        limited = {key: cap for key, cap in ((("user", user), caps.user),
                                             (("project", project), caps.project))
                   if cap.submits_per_s is not None}
        with self._lock:
            now = self._now()
            levels = {key: self._level(key, cap, now) for key, cap in limited.items()}
            waits = {key: (1 - tokens) / (limited[key].submits_per_s or math.inf)
                     for key, tokens in levels.items() if tokens < 1}
            if waits:
                (scope, name), wait = max(waits.items(), key=lambda item: item[1])
                raise TooMany("rate_limited", f"{scope} {name} is submitting faster than the "
                              f"{limited[(scope, name)].submits_per_s:g} jobs per second it "
                              "may; try again shortly (rota retries by itself)", wait)
            for key, tokens in levels.items():
                self._buckets[key] = (tokens - 1, now)

    def _level(self, key: tuple[str, str], cap: Cap, now: float) -> float:
        """The tokens in ``key``'s bucket now (a new bucket is full)."""
        rate = cap.submits_per_s or math.inf
        size = float(cap.burst if cap.burst is not None else max(1.0, rate))
        tokens, at = self._buckets.get(key, (size, now))
        return min(size, tokens + (now - at) * rate)


def fingerprint(body: Any) -> str:
    """The SHA-256 of ``body`` as canonical JSON (what is not JSON, by its ``repr``)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()
