"""Time for the control loop comes from an injected ``Clock``: the system clock in production, a
hand-moved one in tests where timing matters (grace periods, preemption deadlines, usage)."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...


class SystemClock:
    """Seconds since the epoch, like every time the store records."""

    def now(self) -> float:
        return time.time()
