"""Amounts and durations as people read them: ``2 GPUs``, ``80 GiB``, ``1h30m``.

Kept apart from ``rota.cli.explain`` (which needs the scheduler's reason codes) so that the
commands that only list things from the server import neither the scheduler nor pydantic.
"""

from __future__ import annotations

from rota.core import CPU, GPU, MEMORY


def amount(resource: str | None, value: float | int | None) -> str:
    """``(gpu, 2)`` -> ``2 GPUs``; ``(memory, 2048)`` -> ``2 GiB``; ``(cpu, 0.5)`` -> ``0.5 CPU``;
    memory that is not a whole number of GiB has one decimal: NVML's 81559 MiB of an H100 is
    ``79.6 GiB``."""
    if value is None:
        return "?"
    if resource in (GPU, CPU):
        return f"{value:g} {resource.upper()}" + ("" if 0 < value <= 1 else "s")
    if resource in (MEMORY, "gpu_memory"):
        if value < 1024:
            return f"{value:g} MiB"
        gib = value / 1024
        return f"{gib:g} GiB" if gib == int(gib) else f"{gib:.1f} GiB"
    if resource == "replicas":
        return f"{value:g} replica" + ("" if value == 1 else "s")
    return f"{value:g} {resource or ''}".strip()


def duration(seconds: float) -> str:
    """``5400`` -> ``1h30m``; ``45`` -> ``45s``; ``0`` -> ``now``."""
    s = int(round(seconds))
    if s <= 0:
        return "now"
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    parts = [f"{v}{u}" for v, u in ((d, "d"), (h, "h"), (m, "m"), (s, "s")) if v]
    return "".join(parts[:2])
