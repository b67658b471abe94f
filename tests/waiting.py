"""How tests wait for something real to happen: a process to end, a job to change state.

Each suite binds its own deadline (``functools.partial``): generous, since the machine may be
loaded; no test asserts how long anything took. ``ROTA_TEST_SLOWDOWN`` (default 1) multiplies
every deadline, for a machine known to be that many times slower (an emulated CPU, tests/vm.py)."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

SLOWDOWN = float(os.environ.get("ROTA_TEST_SLOWDOWN", "1"))


def poll(predicate: Callable[[], Any], what: str, timeout: float, every: float = 0.02) -> Any:
    """The first truthy value of ``predicate()``, asked every ``every`` seconds; fails the test
    naming ``what`` once ``timeout`` seconds (times ``SLOWDOWN``) have passed."""
    end = time.monotonic() + timeout * SLOWDOWN
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")
