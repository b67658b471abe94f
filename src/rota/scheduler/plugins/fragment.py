"""GPU fragmentation of a node with respect to a target workload (Weng et al., ATC '23).

Vocabulary:
- a *task class* ``m``: CPU request ``cpu``, per-device share ``milli`` (0 for CPU-only, below
  1000 for a share of one device, 1000 for whole devices), device ``count``, allowed GPU model
  ``models`` (patterns; empty: any) and popularity ``weight``;
- a node's *devices*: ``(model, free milli-GPU)`` pairs; ``idle`` is the sum of free milli.
- ``F(n, m)``: the node's idle GPU that class ``m`` cannot use. All of it when ``m`` is
  CPU-only or does not fit the node (too little CPU, too few devices with ``milli`` free);
  otherwise the free milli of the devices ``m`` cannot use (a model it does not accept, or
  less than ``milli`` free).
- ``F(n) = sum_m p_m F(n, m)``, the weights renormalised to sum to 1: the expected idle GPU of
  the node that a task drawn from the workload could not use.

``Fragmenter.node`` caches ``F(n)`` by (free CPU, sorted devices): nodes repeat the same few
states, and a placement's gradient asks for each neighbouring state again and again.
"""

from __future__ import annotations

from dataclasses import dataclass

from rota.scheduler.placement import accepts


@dataclass(frozen=True, slots=True)
class TaskClass:
    cpu: int
    milli: int
    count: int
    models: tuple[str, ...] = ()
    weight: float = 1.0


def class_fragment(cpu: int, devices: tuple[tuple[str, int], ...], m: TaskClass) -> int:
    """``F(n, m)`` in milli-GPU for a node with ``cpu`` free and ``devices`` (model, free)."""
    idle = sum(free for _, free in devices)
    if m.count == 0 or cpu < m.cpu:
        return idle
    usable, unusable = 0, 0
    for model, free in devices:
        if (not m.models or accepts(m.models, model)) and free >= m.milli:
            usable += 1
        else:
            unusable += free
    return unusable if usable >= m.count else idle


MEMO_LIMIT = 1 << 15  # node states remembered; the FGD experiment on 1,213 nodes meets ~24,000


class Fragmenter:
    """``F(n)`` for one target workload, remembered per node state (up to ``MEMO_LIMIT``
    states: a control loop that runs for months meets ever new ones, so a full memo starts
    over rather than grow without bound)."""

    def __init__(self, classes: list[TaskClass]) -> None:
        if not classes:
            raise ValueError("a target workload needs at least one task class")
        total = sum(c.weight for c in classes)
        self.classes = [(c, c.weight / total) for c in classes]
        self._cache: dict[tuple[int, tuple[tuple[str, int], ...]], float] = {}
        # classes alike but for CPU share one device scan: (milli, count, models) -> classes
        self._by_gpu: dict[tuple[int, int, tuple[str, ...]], list[tuple[int, float]]] = {}
        self._cpu_only = 0.0
        for c, p in self.classes:
            if c.count == 0:
                self._cpu_only += p
            else:
                self._by_gpu.setdefault((c.milli, c.count, c.models), []).append((c.cpu, p))

    def node(self, cpu: int, devices: tuple[tuple[str, int], ...]) -> float:
        """``F(n)`` for free ``cpu`` and ``devices`` (sorted ``(model, free)`` pairs)."""
        key = (cpu, devices)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        idle = sum(free for _, free in devices)
        total = self._cpu_only * idle
        for (milli, count, models), cpus in self._by_gpu.items():
            usable, unusable = 0, 0
            for model, free in devices:
                if free >= milli and (not models or accepts(models, model)):
                    usable += 1
                else:
                    unusable += free
            fits = usable >= count
            for need, p in cpus:
                total += p * (unusable if fits and cpu >= need else idle)
        if len(self._cache) >= MEMO_LIMIT:
            self._cache.clear()
        self._cache[key] = total
        return total

    def weights(self) -> list[tuple[TaskClass, float]]:
        return list(self.classes)


__all__ = ["TaskClass", "class_fragment", "Fragmenter"]
