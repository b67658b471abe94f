"""Timing the parts of a control-loop pass, and keeping the garbage collector out of a cycle.

- ``PassTimer`` times the cycle and the store's operations of a pass into the metrics
  (``rota.control.metrics``), when there are any.
- ``out_of_collector`` runs a cycle with every object that exists at its start out of the
  garbage collector's view.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:  # the metrics are composed in only by ``rota up``
    from rota.control.metrics import Metrics


class PassTimer:
    """Times the parts of a pass into ``metrics`` (the cycle, the store's operations)."""

    def __init__(self, metrics: Metrics | None) -> None:
        self.metrics = metrics

    @contextmanager
    def __call__(self, part: str) -> Iterator[None]:
        began = time.perf_counter()
        yield
        if self.metrics is not None:
            took = time.perf_counter() - began
            if part == "cycle":
                self.metrics.cycle_seconds.observe(took)
            else:
                self.metrics.store_seconds.labels(part).observe(took)


@contextmanager
def out_of_collector() -> Iterator[None]:
    """Run a cycle with every object that exists now (the snapshot above all: hundreds of
    thousands of objects at 10,000 nodes) out of the garbage collector's view. The snapshot is
    acyclic and freed by reference counting; without this, full collections during the cycle
    walk all of it (0.2-0.3 s at 10,000 nodes; see bench/RESULTS.md)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
