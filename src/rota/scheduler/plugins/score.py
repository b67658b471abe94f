"""Placement scoring plugins: which of the nodes that fit a replica gets it.

The node index hands candidates over fullest-first (``direction = pack``) or emptiest-first
(``spread``) on every resource the replica asks for (see ``placement.candidates``: GPUs, then
cpu, then memory; a fraction by its device's free share, then the node's free GPU; jobs
without GPUs on nodes without GPUs first), ties to the node first in name order; a plugin
with ``sample = 1`` takes the first that fits, one with a larger sample scores that many
feasible nodes and takes the best (ties: the earlier one). ``round-robin`` walks the nodes
in name order instead, from after the node of the latest bind (in the cycle, else in the
snapshot).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from rota.scheduler.placement import (
    PACK, SPREAD, Shape, choose_devices, free_link_neighbours,
)
from rota.scheduler.plugins.registry import NoArgs, register
from rota.scheduler.state import ClusterState, Slot


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
    GPUs share an NVLink domain, then one where they share a NUMA node; a replica of one
    device (a fraction, one GPU) prefers the node where its device has the fewest wholly free
    NVLink neighbours (``placement.free_link_neighbours``: none where the device is already
    in use, has no NVLink, or the rest of its domain is taken)."""

    name = "topology"
    Args = TopologyArgs

    def __init__(self, args: TopologyArgs) -> None:  # type: ignore[override]
        self.sample = args.sample

    def score(self, slot: Slot, shape: Shape, positions: list[int]) -> float:
        if not positions:
            return 2.0
        if len(positions) == 1:
            return 2.0 - free_link_neighbours(slot, positions[0])
        links = {slot.nvlink[p] for p in positions}
        if len(links) == 1 and None not in links:
            return 2.0
        if len({slot.numa[p] for p in positions}) == 1:
            return 1.0
        return 0.0


@register("placement")
class RoundRobin(Binpack):
    """Backend.AI's round-robin selector: each replica goes to the first node that fits after
    the node that took the last one, in name order, wrapping around. The last one is the
    latest replica placed in this cycle, else the last replica of the job bound latest among
    those the snapshot shows holding resources (``for_cycle``: read from the snapshot, so that
    the same snapshot is decided the same way, after a restart too; what-ifs that are undone do
    not move it)."""

    name = "round-robin"

    def __init__(self, args: NoArgs) -> None:
        self.last: str | None = None  # the node of the latest replica bound

    def for_cycle(self, snapshot, mix) -> RoundRobin:
        """This cycle's copy, starting after the node of the latest bind in ``snapshot``."""
        copy = RoundRobin(NoArgs())
        held = [j for j in snapshot.jobs if j.placement is not None and j.started_at is not None]
        if held:
            latest = max(held, key=lambda j: (j.started_at, _id_key(j.id)))
            copy.last = latest.placement.replicas[-1].node
        return copy

    def select(self, state: ClusterState, shape: Shape, capped: bool
               ) -> tuple[Slot, list[int]] | None:
        slots = state.slots
        after = _latest_take(state)
        if after is None and self.last is not None and self.last in state.by_name:
            after = state.by_name[self.last].i
        start = 0 if after is None else after + 1
        wanted = set(shape.pools)
        for k in range(len(slots)):
            slot = slots[(start + k) % len(slots)]
            if not any(p.key in wanted for p in slot.pools):
                continue
            positions = choose_devices(slot, shape, PACK, capped)
            if positions is not None:
                return slot, positions
        return None

    def bound(self, placement) -> None:
        self.last = placement.replicas[-1].node


def _id_key(job_id: str) -> tuple[int, str]:
    """Job ids in the order they were given (numeric ids by value), for ties in bind time."""
    return (int(job_id), "") if job_id.isdigit() else (-1, job_id)


def _latest_take(state: ClusterState) -> int | None:
    """The node of the latest entry of the overlay's journal that took something."""
    for e in reversed(state.journal):
        if e.cpu > 0 or e.mem > 0 or any(m > 0 for _, m, _ in e.devices):
            return e.slot
    return None
