"""Slurm reservations: which nodes rota leaves alone, from when and until when.

Source: ``scontrol show reservation --oneliner`` run with ``SLURM_TIME_FORMAT=%s``. Slurm 22.05
has no ``--json`` for ``scontrol`` and ``sinfo --reservation`` ignores ``--format``; the
one-line form is one reservation per line of ``Key=Value`` words (a value never holds a space;
it may hold ``=``, as ``TRES=cpu=32``), and the time format makes ``StartTime`` and
``EndTime`` seconds since the epoch. ``No reservations in the system`` means none.

rota submits its jobs outside every reservation, so a reserved node is closed to them: Slurm
would keep a job pinned there pending until the reservation ends. A reservation **blocks** its
nodes from ``lead_s`` before its start until its end (``blocked_nodes``), so that rota stops
placing work on a node ahead of a maintenance window, as an operator drains it beforehand.
A reservation that holds only part of a node (some cores or GPUs) blocks the whole node.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

from rota.backends.slurm.text import SlurmOutputError, expand_hostlist

SHOW_RESERVATIONS = ("scontrol", "show", "reservation", "--oneliner")
TIME_FORMAT = {"SLURM_TIME_FORMAT": "%s"}  # the environment SHOW_RESERVATIONS runs with
NONE_TEXT = "No reservations in the system"


@dataclass(frozen=True, slots=True)
class SlurmReservation:
    name: str
    start: float
    end: float
    nodes: tuple[str, ...]
    flags: frozenset[str]       # MAINT, SPEC_NODES, ...
    users: tuple[str, ...]      # who may run in it ("" entries dropped)
    state: str                  # ACTIVE or INACTIVE (not started yet)


def parse_reservations(text: str) -> tuple[SlurmReservation, ...]:
    out = []
    for k, line in enumerate(text.splitlines()):
        line = line.strip()
        if not line or line == NONE_TEXT:
            continue
        out.append(_reservation(line, f"scontrol show reservation line {k + 1}"))
    return tuple(out)


def _reservation(line: str, where: str) -> SlurmReservation:
    fields: dict[str, str] = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise SlurmOutputError(where, f"expected Key=Value words, got {word!r}")
        fields[key] = value
    for key in ("ReservationName", "StartTime", "EndTime", "Nodes", "State"):
        if key not in fields:
            raise SlurmOutputError(where, f"has no {key} in {line!r}")
    name = fields["ReservationName"]
    return SlurmReservation(
        name=name, start=_epoch(fields["StartTime"], f"{where} StartTime"),
        end=_epoch(fields["EndTime"], f"{where} EndTime"),
        nodes=expand_hostlist(fields["Nodes"], f"reservation {name} Nodes"),
        flags=frozenset(f for f in fields.get("Flags", "").split(",") if f and f != "(null)"),
        users=tuple(u for u in fields.get("Users", "").split(",") if u and u != "(null)"),
        state=fields["State"])


def _epoch(value: str, where: str) -> float:
    if not value.isdigit():
        raise SlurmOutputError(where, f"expected seconds since the epoch (SLURM_TIME_FORMAT=%s), "
                                      f"got {value!r}")
    return float(value)


def blocked_nodes(reservations: Iterable[SlurmReservation], now: float,
                  lead_s: float) -> dict[str, str]:
    """Node -> why rota places nothing there: in a reservation now, or in one that starts
    within ``lead_s``. Where several apply, the one that ends last is named."""
    out: dict[str, tuple[float, str]] = {}
    for r in reservations:
        if r.end <= now or r.start - lead_s > now:
            continue
        kind = "maintenance reservation" if "MAINT" in r.flags else "reservation"
        if r.start <= now:
            why = f"in Slurm {kind} {r.name} until {_when(r.end)}"
        else:
            why = f"Slurm {kind} {r.name} from {_when(r.start)} until {_when(r.end)}"
        for node in r.nodes:
            if node not in out or out[node][0] < r.end:
                out[node] = (r.end, why)
    return {node: why for node, (_end, why) in out.items()}


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
