"""The mutable overlay a cycle works on: free capacity per node and device, with indexes.

``ClusterState`` starts from a snapshot (capacity minus what active jobs hold) and records every
tentative change in a journal, so that what-ifs (a gang that half fits, a preemption trial, a
backfill shadow) are undone exactly with ``undo(mark)``.

Indexes: nodes are grouped into *pools* by (resource group, GPU model), plus one pool per
resource group holding all its nodes (key model ``"*"``) and one holding its nodes without
GPUs (key model ``"-"``). Inside a pool, nodes are bucketed by the number of wholly free GPUs
and by the free share of each device (in tenths of a GPU). A bucket lists its nodes by index,
whatever the order in which they moved there: placement depends on the free capacity now,
never on the history of the overlay (a cycle on a long-lived base decides as one on an overlay
built afresh). Each bucket also has an *ordered* twin, its nodes sorted by what else they
have free: ``(free cpu, free memory, index)`` for the whole-GPU buckets, ``(free milli-GPU of
the node, free cpu, free memory, index)`` for the fraction buckets; so a request finds the
node its scoring plugin prefers on every resource it asks for without scoring every node.

Nodes are indexed in name order, whatever the order of the node list: no decision depends on
the order in which nodes are listed.

``epoch`` grows whenever free capacity grows beyond what an earlier moment had; a placement
that failed at epoch ``e`` fails again while ``epoch == e``. ``version`` names the overlay's
content: every change gives it a new name, and an undo back to a mark the name it had there
(equal versions, equal overlay).

A *cap* limits what a job that would still run at a reservation's start may take on a reserved
node (see ``backfill``): it fits only where both the free capacity and the cap allow.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass

from rota.core import MILLI, DeviceShare, Node
from rota.core.nodes import ENGINE_LABEL

ALL_MODELS = "*"
NO_GPUS = "-"  # the pool of a resource group's nodes without GPUs
FRAC_LEVELS = 11  # largest free share on a device, in tenths: 0..10


class Cap:
    __slots__ = ("cpu", "mem", "milli", "gmem")

    def __init__(self, cpu: int, mem: int, milli: list[int], gmem: list[int]) -> None:
        self.cpu, self.mem, self.milli, self.gmem = cpu, mem, milli, gmem


class Slot:
    """One node's free capacity. ``milli[d]``/``gmem[d]`` are free on device position ``d``."""

    __slots__ = ("i", "node", "name", "cpu", "mem", "milli", "gmem", "dev_mem", "models",
                 "numa", "nvlink", "whole", "level_count", "pools", "cap", "listed",
                 "profiles", "mig", "ends", "switching")

    def __init__(self, i: int, node: Node) -> None:
        self.i, self.node, self.name = i, node, node.name
        self.cpu, self.mem = node.cpu_milli, node.memory_mib
        devs = node.devices
        # what never changes is kept in tuples of plain values: the garbage collector stops
        # tracking those, which matters with tens of thousands of nodes
        self.dev_mem = tuple([d.memory_mib for d in devs])
        self.milli = [MILLI if d.healthy else 0 for d in devs]
        self.gmem = [d.memory_mib if d.healthy else 0 for d in devs]
        if node.foreign:
            self._hold_foreign(node)
        self.models = tuple([d.model for d in devs])
        self.numa = tuple([d.numa for d in devs])
        self.nvlink = tuple([d.nvlink for d in devs])
        # each device's MIG profile ("" for a whole GPU), and whether the node has any
        self.profiles = tuple([d.profile for d in devs])
        self.mig = any(self.profiles)
        # when a planned MIG switch takes each device away (None: never), and whether any does
        self.ends = tuple([d.switch_at for d in devs])
        self.switching = any(e is not None for e in self.ends)
        # wholly free devices, and how many devices have each tenths-of-a-GPU level of free
        # share; kept up to date device by device as shares are taken and given
        self.whole = sum(self.wholly_free(p) for p in range(len(devs)))
        self.level_count = [0] * FRAC_LEVELS
        for m in self.milli:
            if m > 0:
                self.level_count[m * (FRAC_LEVELS - 1) // MILLI] += 1
        self.pools: tuple[Pool, ...] = ()
        self.cap: Cap | None = None
        # where the node sits in its pools' ordered buckets: (whole bucket, its entry,
        # fraction levels, their entry)
        self.listed: tuple | None = None

    def _hold_foreign(self, node: Node) -> None:
        """Take what work outside rota holds (``Node.foreign``) as if a job held it."""
        position = {d.index: p for p, d in enumerate(node.devices)}
        for held in node.foreign:
            self.cpu = max(0, self.cpu - held.cpu_milli)
            self.mem = max(0, self.mem - held.memory_mib)
            for share in held.devices:
                p = position[share.index]
                self.milli[p] = max(0, self.milli[p] - share.milli)
                self.gmem[p] = max(0, self.gmem[p] - share.memory_mib)

    def wholly_free(self, p: int) -> bool:
        return self.milli[p] == MILLI and self.gmem[p] == self.dev_mem[p]

    def levels(self) -> list[int]:
        """The tenths-of-a-GPU levels of the devices' free shares."""
        return [level for level, n in enumerate(self.level_count) if n]


class Pool:
    """Nodes of one (resource group, model), bucketed by wholly free GPUs and by the free-share
    levels of their devices (a node sits in the bucket of every level one of its devices has).
    Each bucket is a sorted list of node indexes."""

    __slots__ = ("key", "whole", "frac", "ordered_whole", "ordered_frac")

    def __init__(self, key: tuple[str, str], max_gpus: int) -> None:
        self.key = key
        self.whole: list[list[int]] = [[] for _ in range(max_gpus + 1)]
        self.frac: list[list[int]] = [[] for _ in range(FRAC_LEVELS)]
        # the same buckets, ordered by (cpu, memory, index) and (free milli, cpu, memory, index)
        self.ordered_whole: list[list[tuple]] = [[] for _ in range(max_gpus + 1)]
        self.ordered_frac: list[list[tuple]] = [[] for _ in range(FRAC_LEVELS)]


SHARE = "share"  # the task kind of a fraction of one device


def task_kind(devices) -> str | int:
    """A job's kind of task from its device deltas ``(position, milli, memory)``: ``SHARE``
    (a fraction of one device) or the number of devices it holds."""
    return SHARE if len(devices) == 1 and abs(devices[0][1]) < MILLI else len(devices)


@dataclass(slots=True)
class Entry:
    slot: int
    cpu: int
    mem: int
    devices: tuple[tuple[int, int, int], ...]  # (position, milli, memory) taken (+) or given (-)
    capped: bool


class ClusterState:
    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.slots = [Slot(i, n) for i, n in enumerate(sorted(nodes, key=lambda n: n.name))]
        self.by_name = {s.name: s for s in self.slots}
        # the labels of the backends that launch jobs on some node, where nodes name any
        # (``rota.core.nodes.ENGINE_LABEL``): a gang goes to nodes that share one
        self.engines = tuple(sorted({k for n in nodes for k, v in n.labels.items()
                                     if k.startswith(ENGINE_LABEL) and v == "true"}))
        self.pools: dict[tuple[str, str], Pool] = {}
        self.journal: list[Entry] = []
        self.loaded_kinds: dict[int, dict[str | int, int]] = {}  # slot -> task kind -> loaded jobs
        self.epoch = 0
        self.version = self._names = 0
        self._before: list[int] = []  # the version before each journal entry
        max_gpus = max((len(n.devices) for n in nodes), default=0)
        shared: dict[tuple, tuple[Pool, ...]] = {}  # nodes alike share one tuple of pools
        for slot in self.slots:
            if not slot.node.schedulable:
                continue
            keys = tuple((slot.node.resource_group, model)
                         for model in (ALL_MODELS, *(dict.fromkeys(slot.models) or [NO_GPUS])))
            if keys not in shared:
                for key in keys:
                    if key not in self.pools:
                        self.pools[key] = Pool(key, max_gpus)
                shared[keys] = tuple(self.pools[key] for key in keys)
            slot.pools = shared[keys]
            levels = slot.levels()
            for pool in slot.pools:
                pool.whole[slot.whole].append(slot.i)  # slots come in index order
                for level in levels:
                    pool.frac[level].append(slot.i)
            self._order(slot)

    # -- changes -----------------------------------------------------------------------------

    def take(self, slot: Slot, cpu: int, mem: int, devices: tuple[DeviceShare, ...] | list,
             positions: list[int], capped: bool = False) -> None:
        """Allocate ``cpu``, ``mem`` and the device shares (at ``positions``) on ``slot``."""
        deltas = tuple((p, d.milli, d.memory_mib) for p, d in zip(positions, devices))
        self._apply(Entry(slot.i, cpu, mem, deltas, capped and slot.cap is not None))

    def load(self, slot: Slot, cpu: int, mem: int, deltas: list[tuple[int, int, int]]) -> None:
        """Like ``take``, for what active jobs hold when the overlay is built: nothing to undo,
        so nothing goes to the journal; the kind of task it is (``task_kind``) is counted in
        ``loaded_kinds`` (negative deltas: a job released)."""
        self._unorder(slot)
        slot.cpu -= cpu
        slot.mem -= mem
        if deltas:
            self._change_devices(slot, deltas, 1)
            kinds = self.loaded_kinds.setdefault(slot.i, {})
            kind = task_kind(deltas)
            n = kinds.get(kind, 0) + (1 if deltas[0][1] > 0 else -1)
            if n > 0:
                kinds[kind] = n
            else:
                kinds.pop(kind, None)
        self._order(slot)

    def give(self, slot: Slot, cpu: int, mem: int, deltas: tuple[tuple[int, int, int], ...]) -> None:
        """Release what a job held on ``slot``; free capacity grows, so the epoch moves."""
        self._apply(Entry(slot.i, -cpu, -mem, tuple((p, -m, -g) for p, m, g in deltas), False))
        self.epoch += 1

    def mark(self) -> int:
        return len(self.journal)

    def undo(self, mark: int) -> None:
        grew = False
        while len(self.journal) > mark:
            e = self.journal.pop()
            grew = grew or e.cpu > 0 or e.mem > 0 or any(m > 0 for _, m, _ in e.devices)
            self._change(e, -1)
        if grew:
            self.epoch += 1
        if len(self._before) > mark:  # the overlay is as it was at the mark, and so its name
            self.version = self._before[mark]
            del self._before[mark:]

    def _apply(self, e: Entry) -> None:
        self.journal.append(e)
        self._before.append(self.version)
        self._change(e, 1)

    def _change(self, e: Entry, sign: int) -> None:
        self._names += 1
        self.version = self._names
        s = self.slots[e.slot]
        self._unorder(s)
        s.cpu -= sign * e.cpu
        s.mem -= sign * e.mem
        if e.devices:
            self._change_devices(s, e.devices, sign)
        if e.capped and s.cap is not None:
            cap = s.cap
            cap.cpu -= sign * e.cpu
            cap.mem -= sign * e.mem
            for p, m, g in e.devices:
                cap.milli[p] -= sign * m
                cap.gmem[p] -= sign * g
        self._order(s)

    def _order(self, s: Slot) -> None:
        """List ``s`` in its pools' ordered buckets under its free capacity now."""
        if not s.pools:
            return
        entry = (s.cpu, s.mem, s.i)
        levels = tuple(s.levels())
        frac = (sum(s.milli), s.cpu, s.mem, s.i)
        for pool in s.pools:
            insort(pool.ordered_whole[s.whole], entry)
            for level in levels:
                insort(pool.ordered_frac[level], frac)
        s.listed = (s.whole, entry, levels, frac)

    def _unorder(self, s: Slot) -> None:
        if s.listed is None:
            return
        whole, entry, levels, frac = s.listed
        for pool in s.pools:
            _discard(pool.ordered_whole[whole], entry)
            for level in levels:
                _discard(pool.ordered_frac[level], frac)
        s.listed = None

    def _change_devices(self, s: Slot, devices: tuple[tuple[int, int, int], ...], sign: int) -> None:
        """Apply device deltas to ``s``, then move it between its pools' buckets: to its new
        whole-GPU bucket, out of the fraction buckets no device is at any more, into the new ones."""
        whole, counts = s.whole, s.level_count
        milli, gmem, full = s.milli, s.gmem, s.dev_mem
        before: dict[int, int] = {}  # fraction level -> its device count before this change
        for p, m, g in devices:
            was = milli[p]
            if was == MILLI and gmem[p] == full[p]:
                whole -= 1
            if was > 0:
                level = was * (FRAC_LEVELS - 1) // MILLI
                before.setdefault(level, counts[level])
                counts[level] -= 1
            now = milli[p] = was - sign * m
            gmem[p] -= sign * g
            if now == MILLI and gmem[p] == full[p]:
                whole += 1
            if now > 0:
                level = now * (FRAC_LEVELS - 1) // MILLI
                before.setdefault(level, counts[level])
                counts[level] += 1
        if whole != s.whole:
            for pool in s.pools:
                _discard(pool.whole[s.whole], s.i)
                insort(pool.whole[whole], s.i)
            s.whole = whole
        for level, had in before.items():
            if (had > 0) == (counts[level] > 0):
                continue
            for pool in s.pools:
                if had:
                    _discard(pool.frac[level], s.i)
                else:
                    insort(pool.frac[level], s.i)

    # -- caps (backfill) ---------------------------------------------------------------------

    def set_cap(self, slot: Slot, cap: Cap) -> None:
        slot.cap = cap

    def clear_caps(self) -> None:
        for s in self.slots:
            s.cap = None


def _discard(bucket: list, item) -> None:
    del bucket[bisect_left(bucket, item)]
