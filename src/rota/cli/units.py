"""Amounts and durations as people read them (``rota.core.wording``): the commands that only
list things from the server import this light module, and neither the scheduler nor pydantic.
"""

from __future__ import annotations

from rota.core.wording import amount, duration

__all__ = ["amount", "duration"]
