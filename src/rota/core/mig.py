"""MIG (Multi-Instance GPU): the GPU instance profiles NVIDIA documents, and valid geometries.

Vocabulary, as NVIDIA's MIG user guide and NVML use it:

- A MIG-enabled GPU is cut into *GPU instances*. Each has a *profile* (``1g.10gb``: one
  compute slice, about 10 GB of memory) and sits at a *placement*: a start and a size in
  *memory slices*. The GPUs of ``TABLES`` have 7 compute slices and 8 memory slices.
- A profile may be placed only at the starts NVML's possible placements report for it
  (``MigProfile.starts``): on an A100-40GB, ``7g.40gb`` at 0; ``4g.20gb`` at 0; ``3g.20gb`` at 0
  or 4; ``2g.10gb`` at 0, 2 or 4; ``1g.10gb`` at 0, 2, 4 or 6; ``1g.5gb`` at 0 to 6.
- A *geometry* (the instances of one GPU, each a profile at a start) is valid when every
  instance sits at a start its profile allows and no two share a memory slice
  (``geometry_problem``); so a ``3g`` cannot sit where a ``4g`` is, while a ``4g`` at 0 and a
  ``3g`` at 4 fill a GPU together.
- Each instance is a device of its own to the scheduler; it is charged by its compute slices:
  a ``1g`` instance of a 7-slice GPU is 1/7 of a GPU (``profile_milli``).
- A queue's quota may count instances of a profile as a resource of its own,
  ``mig-<profile>`` (``mig-1g.10gb: 14``), as NVIDIA's Kubernetes device plugin names them.

Only the documented profiles without media extensions (``+me``) are listed. The data is
pure; nothing here reads NVML (``rota.backends.nvml`` does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rota.core.errors import InvalidSpec

COMPUTE_SLICES = 7   # of every GPU in TABLES
MEMORY_SLICES = 8
MILLI = 1000
QUOTA_PREFIX = "mig-"  # a quota resource counting instances of one profile: mig-1g.10gb
_PROFILE = re.compile(r"^([1-7])g\.(\d+)gb$")


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One GPU instance profile of one GPU model: its compute and memory slices, its memory
    in GB as its name says, how many instances a GPU holds at most, and the starts (in memory
    slices) it may be placed at; each placement spans ``memory`` slices."""

    name: str
    compute: int
    memory: int
    memory_gb: int
    instances: int
    starts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MigTable:
    """The profiles of one GPU model (its family and memory, as rota names models)."""

    gpu: str            # A100-40GB, H100-80GB ...
    family: str         # A100, H100, H200
    memory_gb: int
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile | None:
        return next((p for p in self.profiles if p.name == name), None)

    def by_slices(self, compute: int, memory: int) -> MigProfile | None:
        """The profile with these compute and memory slices (as NVML reports an instance)."""
        return next((p for p in self.profiles if (p.compute, p.memory) == (compute, memory)),
                    None)


def _table(gpu: str, sizes: tuple[int, int, int, int, int, int]) -> MigTable:
    """A 7-slice GPU's table from its profiles' memory in GB, in NVIDIA's order: the small
    1g, the 1g of two memory slices, 2g, 3g, 4g, 7g; their slices and placements are the
    same on every GPU of ``TABLES``."""
    family, memory = gpu.split("-")
    one, one_wide, two, three, four, seven = sizes
    shapes = ((1, 1, one, 7, (0, 1, 2, 3, 4, 5, 6)), (1, 2, one_wide, 4, (0, 2, 4, 6)),
              (2, 2, two, 3, (0, 2, 4)), (3, 4, three, 2, (0, 4)), (4, 4, four, 1, (0,)),
              (7, 8, seven, 1, (0,)))
    return MigTable(gpu, family, int(memory.removesuffix("GB")), tuple(
        MigProfile(f"{c}g.{gb}gb", c, m, gb, n, starts) for c, m, gb, n, starts in shapes))


TABLES: tuple[MigTable, ...] = (
    _table("A100-40GB", (5, 10, 10, 20, 20, 40)),
    _table("A100-80GB", (10, 20, 20, 40, 40, 80)),
    _table("H100-80GB", (10, 20, 20, 40, 40, 80)),   # SXM5 and PCIe alike
    _table("H200-141GB", (18, 35, 35, 71, 71, 141)),
)
PROFILE_NAMES: frozenset[str] = frozenset(p.name for t in TABLES for p in t.profiles)


def table_for(model: str, memory_mib: int) -> MigTable | None:
    """The table of a GPU of ``model`` (rota's short name: ``A100-40GB``, ``H100``) with
    ``memory_mib`` of memory: its family, and the table whose memory is nearest, within a
    tenth (NVML reports a little less than the nominal size); None for a GPU without MIG."""
    family = model.split("-")[0].upper()
    gib = memory_mib / 1024
    near = [t for t in TABLES if t.family == family and abs(t.memory_gb - gib) <= t.memory_gb / 10]
    return min(near, key=lambda t: abs(t.memory_gb - gib), default=None)


def check_profile(name: object, field: str) -> str:
    """``name`` if it is a documented MIG profile (``1g.10gb``), else ``InvalidSpec``."""
    if not isinstance(name, str) or not _PROFILE.match(name):
        raise InvalidSpec(field, f"expected a MIG profile such as 1g.10gb, got {name!r}")
    if name not in PROFILE_NAMES:
        raise InvalidSpec(field, f"{name!r} is not a MIG profile of any GPU rota knows; known: "
                                 f"{', '.join(sorted(PROFILE_NAMES, key=_order))}")
    return name


def _order(name: str) -> tuple[int, int]:
    compute, memory = _PROFILE.match(name).groups()  # type: ignore[union-attr]
    return int(compute), int(memory)


def profile_compute(name: str) -> int:
    """The compute slices of a profile, from its name: ``3g.40gb`` -> 3."""
    return int(name.split("g.", 1)[0])


def profile_milli(name: str) -> int:
    """The milli-GPU an instance of profile ``name`` is charged (quota, fair share,
    accounting): its compute slices of ``COMPUTE_SLICES``, rounded; ``7g`` is a whole GPU."""
    return round(profile_compute(name) * MILLI / COMPUTE_SLICES)


def quota_resource(name: str) -> str:
    """The quota resource counting instances of profile ``name``: ``mig-1g.10gb``."""
    return QUOTA_PREFIX + name


def geometry_problem(table: MigTable, instances: list[tuple[str, int]]) -> str | None:
    """Why the geometry ``instances`` (profile name, start) is not valid on a GPU of
    ``table``, or None when it is: each profile must be the table's, at one of its starts, no
    two instances may share a memory slice, and their compute slices must not exceed the GPU's."""
    taken: dict[int, str] = {}
    compute = 0
    for name, start in instances:
        profile = table.profile(name)
        if profile is None:
            return f"{name} is not a MIG profile of {table.gpu}"
        if start not in profile.starts:
            return (f"{name} cannot start at memory slice {start} on {table.gpu}; it may start "
                    f"at {', '.join(map(str, profile.starts))}")
        for s in range(start, start + profile.memory):
            if s in taken:
                return f"{name} at {start} overlaps {taken[s]} (memory slice {s})"
        for s in range(start, start + profile.memory):
            taken[s] = f"{name} at {start}"
        compute += profile.compute
    if compute > COMPUTE_SLICES:
        return f"the instances take {compute} compute slices; a GPU has {COMPUTE_SLICES}"
    return None


def check_geometry(table: MigTable, instances: list[tuple[str, int]], field: str) -> None:
    """``geometry_problem`` as an ``InvalidSpec`` naming ``field``."""
    problem = geometry_problem(table, instances)
    if problem is not None:
        raise InvalidSpec(field, problem)


def is_instance_index(index: int) -> bool:
    """Whether device ``index`` of a node is a MIG instance's (``instance_index``)."""
    return index >= 1000


def instance_index(parent: int, start: int) -> int:
    """The device index of the instance at ``start`` on GPU ``parent``: ``(parent + 1) * 1000
    + start`` (GPU 0's instance at memory slice 4 is device 1004), above every whole GPU's
    index and stable while the geometry stays."""
    return (parent + 1) * 1000 + start
