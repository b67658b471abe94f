"""Placement scoring plugins: which of the nodes that fit a replica gets it.

The node index hands candidates over fullest-first (``direction = pack``) or emptiest-first
(``spread``); a plugin with ``sample = 1`` takes the first that fits, one with a larger sample
scores that many feasible nodes and takes the best (ties: the earlier one).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from rota.scheduler.placement import PACK, SPREAD, Shape
from rota.scheduler.plugins.registry import NoArgs, register
from rota.scheduler.state import Slot


@register("placement")
class Binpack:
    """Fill the fullest node (fewest free GPUs) that fits, keeping whole nodes free for large
    jobs; fractions go on the most used device that still has room."""

    name = "binpack"
    direction = PACK
    sample = 1

    def __init__(self, args: NoArgs) -> None:
        pass

    def score(self, slot: Slot, shape: Shape, positions: list[int]) -> float:
        return 0.0


@register("placement")
class Spread(Binpack):
    """Use the emptiest node that fits, spreading load (and failure impact) across nodes."""

    name = "spread"
    direction = SPREAD


class TopologyArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sample: int = Field(8, ge=1, le=1000, description="feasible nodes compared per replica")


@register("placement")
class Topology(Binpack):
    """Binpack, but among the first ``sample`` nodes that fit prefer one where the replica's
    GPUs share an NVLink domain, then one where they share a NUMA node."""

    name = "topology"
    Args = TopologyArgs

    def __init__(self, args: TopologyArgs) -> None:  # type: ignore[override]
        self.sample = args.sample

    def score(self, slot: Slot, shape: Shape, positions: list[int]) -> float:
        if len(positions) <= 1:
            return 2.0
        links = {slot.nvlink[p] for p in positions}
        if len(links) == 1 and None not in links:
            return 2.0
        if len({slot.numa[p] for p in positions}) == 1:
            return 1.0
        return 0.0
