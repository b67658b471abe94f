"""MIG geometry plans: named geometries, a calendar that switches nodes between them, and
what a switch changes on one GPU.

Vocabulary:

- A *geometry* is what one GPU should be: ``whole`` (MIG mode off: a whole GPU) or a list of
  GPU instances, each a profile with or without a start (``7x1g.10gb``, ``[4g.40gb,
  3g.40gb]``, ``[{profile: 3g.40gb, start: 4}]``). It is checked against a GPU's table
  (``rota.core.mig``) when it is *resolved* for that GPU (``resolve``): an instance without a
  start takes the first start its profile allows that is still free, in the order listed, as
  ``nvidia-smi mig -cgi`` does; the result must be a valid geometry of the table.
- A *calendar entry* says that from a time of day (``at``, seconds after local midnight in
  time zone ``zone``) the nodes it selects (names or shell patterns, ``gpu-[a-d]``) take a
  geometry. On a node, the entry *in effect* is the selecting entry whose last occurrence is
  the latest; the *next switch* is the earliest next occurrence of a selecting entry whose
  geometry differs from the one in effect. When an entry occurs is a matter of time zones,
  which this pure module does not read: a caller passes ``times(entry, now) -> (last, next)``
  in seconds since the epoch (``rota.control.migcalendar.zoned_times``).
- A *plan* is the geometries, the calendar, and ``evict``: whether a switch may evict the
  jobs on the instances it destroys (with their checkpoint grace) even when they may not be
  preempted. Without it, such a job defers the switch until it ends, and the scheduler does
  not place one on an instance a switch will destroy if it would still run then.
- The *diff* of a GPU (``diff``) from its current instances to a target: the instances that
  *stay* (same profile at the same start), those to *destroy* and those to *create*, and
  whether MIG mode must be turned on or off. Only the instances that must change change:
  jobs on instances that stay are never touched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Callable, Mapping

from rota.core.errors import InvalidSpec
from rota.core.mig import (
    MigTable, TABLES, check_profile, geometry_problem, instance_index,
)

WHOLE = "whole"
_COUNTED = re.compile(r"^\s*(\d+)\s*[xX]\s*(\S+)\s*$")
_AT = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
Instance = tuple[str, int]   # (profile, start)


@dataclass(frozen=True, slots=True)
class Geometry:
    """A named geometry of one GPU: ``whole``, or instances as (profile, start or None)."""

    name: str
    whole: bool
    instances: tuple[tuple[str, int | None], ...] = ()


@dataclass(frozen=True, slots=True)
class CalendarEntry:
    at: int                     # seconds after local midnight
    zone: str                   # an IANA time zone: Europe/Paris, UTC
    nodes: tuple[str, ...]      # node names or shell patterns
    geometry: str

    def selects(self, node: str) -> bool:
        return any(fnmatchcase(node, pattern) for pattern in self.nodes)


@dataclass(frozen=True, slots=True)
class MigPlan:
    geometries: Mapping[str, Geometry]
    calendar: tuple[CalendarEntry, ...]
    evict: bool = False


@dataclass(frozen=True, slots=True)
class Target:
    """What the calendar says of one node at a time: the entry in effect (None: no entry
    selects it, so its geometry is left as it is) and the next switch, if any."""

    entry: CalendarEntry | None
    since: float | None
    next_entry: CalendarEntry | None = None
    next_at: float | None = None


@dataclass(frozen=True, slots=True)
class GeometryDiff:
    """From a GPU's current instances to a target (module docstring: *diff*). ``mode`` is
    ``"on"`` or ``"off"`` when MIG mode must change, else ``""``."""

    stay: tuple[Instance, ...]
    destroy: tuple[Instance, ...]
    create: tuple[Instance, ...]
    mode: str = ""

    @property
    def empty(self) -> bool:
        return not (self.destroy or self.create or self.mode)


Times = Callable[[CalendarEntry, float], tuple[float, float]]


def diff(current: tuple[Instance, ...] | None, target: tuple[Instance, ...] | None
         ) -> GeometryDiff:
    """What changes from ``current`` to ``target`` (None: a whole GPU, MIG mode off)."""
    now, want = set(current or ()), set(target or ())
    mode = ("on" if current is None and target is not None
            else "off" if current is not None and target is None else "")
    return GeometryDiff(stay=tuple(sorted(now & want, key=_by_start)),
                        destroy=tuple(sorted(now - want, key=_by_start)),
                        create=tuple(sorted(want - now, key=_by_start)), mode=mode)


def _by_start(instance: Instance) -> tuple[int, str]:
    return instance[1], instance[0]


def resolve(geometry: Geometry, table: MigTable, field: str) -> tuple[Instance, ...] | None:
    """The instances of ``geometry`` on a GPU of ``table`` (None for ``whole``), starts
    placed as the module docstring says; ``InvalidSpec`` naming ``field`` if it cannot be."""
    if geometry.whole:
        return None
    taken: set[int] = set()
    for name, start in geometry.instances:
        profile = table.profile(name)
        if profile is not None and start is not None:
            taken.update(range(start, start + profile.memory))
    out: list[Instance] = []
    for name, start in geometry.instances:
        profile = table.profile(name)
        if profile is None:
            raise InvalidSpec(field, f"{name} is not a MIG profile of {table.gpu}")
        if start is None:
            start = next((s for s in profile.starts
                          if not taken & set(range(s, s + profile.memory))), None)
            if start is None:
                raise InvalidSpec(field, f"no room left for {name} on {table.gpu} after "
                                         f"{', '.join(f'{n} at {s}' for n, s in out)}")
            taken.update(range(start, start + profile.memory))
        out.append((name, start))
    problem = geometry_problem(table, out)
    if problem is not None:
        raise InvalidSpec(field, problem)
    return tuple(sorted(out, key=_by_start))


def target_at(plan: MigPlan, node: str, now: float, times: Times) -> Target:
    """The entry in effect on ``node`` at ``now`` and the next switch (module docstring)."""
    chosen = [(times(e, now), e) for e in plan.calendar if e.selects(node)]
    if not chosen:
        return Target(None, None)
    (since, _), entry = max(chosen, key=lambda c: c[0][0])
    ahead = [(nxt, e) for (_, nxt), e in chosen if e.geometry != entry.geometry]
    if not ahead:
        return Target(entry, since)
    next_at, next_entry = min(ahead, key=lambda c: c[0])
    return Target(entry, since, next_entry, next_at)


# -- reading a plan -------------------------------------------------------------------------

def parse_plan(data: object, field: str = "mig") -> MigPlan:
    """A plan from its mapping: ``geometries`` (name -> geometry), ``calendar`` (a list of
    ``{at, zone, nodes, geometry}``) and ``evict``; each mistake names its field. A geometry
    must be valid on at least one GPU rota knows; ``zone`` is checked by the caller, who can
    read the time zone database."""
    if not isinstance(data, dict):
        raise InvalidSpec(field, "must be a mapping of geometries, calendar and evict")
    if unknown := set(data) - {"geometries", "calendar", "evict"}:
        raise InvalidSpec(f"{field}.{sorted(unknown)[0]}", "unknown key; known: calendar, "
                                                           "evict, geometries")
    evict = data.get("evict", False)
    if not isinstance(evict, bool):
        raise InvalidSpec(f"{field}.evict", f"must be true or false, got {evict!r}")
    raw = data.get("geometries") or {}
    if not isinstance(raw, dict):
        raise InvalidSpec(f"{field}.geometries", "must be a mapping of name to geometry")
    geometries = {str(name): parse_geometry(str(name), value, f"{field}.geometries.{name}")
                  for name, value in raw.items()}
    entries = data.get("calendar") or []
    if not isinstance(entries, list):
        raise InvalidSpec(f"{field}.calendar", "must be a list of {at, zone, nodes, geometry}")
    calendar = tuple(_entry(e, geometries, f"{field}.calendar[{k}]")
                     for k, e in enumerate(entries))
    return MigPlan(geometries, calendar, evict)


def parse_geometry(name: str, value: object, field: str) -> Geometry:
    if value == WHOLE:
        return Geometry(name, True)
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else None
    if not items:
        raise InvalidSpec(field, "must be whole, a profile list such as [4g.40gb, 3g.40gb] "
                                 "or 7x1g.10gb")
    instances: list[tuple[str, int | None]] = []
    for k, item in enumerate(items):
        where = f"{field}[{k}]" if isinstance(value, list) else field
        instances.extend(_instances(item, where))
    geometry = Geometry(name, False, tuple(instances))
    problems = []
    for table in TABLES:
        try:
            resolve(geometry, table, field)
            return geometry
        except InvalidSpec as exc:
            problems.append(f"{table.gpu}: {exc.reason}")
    raise InvalidSpec(field, "is valid on no GPU rota knows (" + "; ".join(problems) + ")")


def _instances(item: object, field: str) -> list[tuple[str, int | None]]:
    if isinstance(item, str):
        counted = _COUNTED.match(item)
        count, name = (int(counted.group(1)), counted.group(2)) if counted else (1, item.strip())
        if count < 1:
            raise InvalidSpec(field, "the count must be at least 1")
        return [(check_profile(name, field), None)] * count
    if not isinstance(item, dict) or set(item) - {"profile", "start"}:
        raise InvalidSpec(field, "must be a profile (1g.10gb, 7x1g.10gb) or {profile, start}")
    start = item.get("start")
    if start is not None and (not isinstance(start, int) or isinstance(start, bool)
                              or start < 0):
        raise InvalidSpec(f"{field}.start", f"must be a memory slice, 0 or more, got {start!r}")
    return [(check_profile(item.get("profile"), f"{field}.profile"), start)]


def _entry(data: object, geometries: Mapping[str, Geometry], field: str) -> CalendarEntry:
    if not isinstance(data, dict):
        raise InvalidSpec(field, "must be a mapping of at, zone, nodes and geometry")
    if unknown := set(data) - {"at", "zone", "nodes", "geometry"}:
        raise InvalidSpec(f"{field}.{sorted(unknown)[0]}", "unknown key; known: at, geometry, "
                                                           "nodes, zone")
    at = data.get("at")
    match = _AT.match(at) if isinstance(at, str) else None
    if match is None:
        raise InvalidSpec(f"{field}.at", f"must be a time of day as HH:MM, got {at!r}")
    zone = data.get("zone", "UTC")
    if not isinstance(zone, str) or not zone:
        raise InvalidSpec(f"{field}.zone", f"must be a time zone such as Europe/Paris, got "
                                           f"{zone!r}")
    nodes = data.get("nodes", ["*"])
    nodes = [nodes] if isinstance(nodes, str) else nodes
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) and n
                                                           for n in nodes):
        raise InvalidSpec(f"{field}.nodes", "must be a node name or pattern, or a list of them")
    geometry = data.get("geometry")
    if geometry not in geometries:
        raise InvalidSpec(f"{field}.geometry", f"{geometry!r} is not a declared geometry; "
                                               f"declared: {', '.join(sorted(geometries))}")
    hours, minutes = int(match.group(1)), int(match.group(2))
    return CalendarEntry(hours * 3600 + minutes * 60, zone, tuple(nodes), str(geometry))


def doomed(diffs: Mapping[int, GeometryDiff]) -> frozenset[int]:
    """The devices of a node that switching its GPUs (GPU index -> diff) takes away: each
    instance destroyed (``rota.core.mig.instance_index``), and a whole GPU that MIG mode
    cuts into instances."""
    out = {instance_index(gpu, start) for gpu, d in diffs.items() for _, start in d.destroy}
    out.update(gpu for gpu, d in diffs.items() if d.mode == "on")
    return frozenset(out)
