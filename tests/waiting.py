"""How tests wait for something real to happen: a process to end, a job to change state.

Each suite binds its own deadline (``functools.partial``): generous, since the machine may be
loaded; no test asserts how long anything took."""

from __future__ import annotations

import time
from typing import Any, Callable


def poll(predicate: Callable[[], Any], what: str, timeout: float, every: float = 0.02) -> Any:
    """The first truthy value of ``predicate()``, asked every ``every`` seconds; fails the test
    naming ``what`` once ``timeout`` seconds have passed."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")
